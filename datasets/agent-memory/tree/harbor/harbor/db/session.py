"""Database session handling (SQLAlchemy 2.0): one Session per request or task."""
from collections.abc import Iterator

from sqlalchemy import create_engine
from sqlalchemy.orm import Session, sessionmaker

from harbor.settings import settings

engine = create_engine(settings.database_url, pool_pre_ping=True, pool_size=10)
SessionLocal = sessionmaker(bind=engine, autoflush=False, expire_on_commit=False)


def get_session() -> Iterator[Session]:
    """FastAPI dependency: the transaction commits when the request handler returns."""
    with SessionLocal.begin() as session:
        yield session
