"""Celery application for harbor workers."""
from celery import Celery

from harbor.settings import settings

app = Celery("harbor", broker=settings.broker_url)
app.conf.update(
    broker_transport_options={
        "visibility_timeout": 7200,  # month-end exports run ~80 min
        "health_check_interval": 30,
        "socket_keepalive": True,
    },
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    task_ignore_result=True,
    task_serializer="json",
    accept_content=["json"],
    timezone="UTC",
    task_routes={"harbor.exports.*": {"queue": "exports"}},
)
