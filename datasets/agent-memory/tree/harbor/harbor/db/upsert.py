"""Order upserts. Rows are sorted so concurrent batches lock rows in the same order (INC-0519)."""
import random
import time

from psycopg.errors import DeadlockDetected
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.exc import OperationalError

from harbor.db.models import Order

MAX_ATTEMPTS = 3


def upsert_orders(session, rows: list[dict]) -> None:
    rows = sorted(rows, key=lambda r: (r["tenant_id"], r["order_id"]))
    stmt = insert(Order).values(rows)
    stmt = stmt.on_conflict_do_update(
        index_elements=[Order.tenant_id, Order.order_id],
        set_={"status": stmt.excluded.status, "updated_at": stmt.excluded.updated_at},
    )
    for attempt in range(1, MAX_ATTEMPTS + 1):
        try:
            with session.begin_nested():
                session.execute(stmt)
            return
        except OperationalError as exc:
            if not isinstance(exc.orig, DeadlockDetected) or attempt == MAX_ATTEMPTS:
                raise
            time.sleep(random.uniform(0.05, 0.25) * attempt)
