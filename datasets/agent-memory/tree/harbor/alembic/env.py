"""Alembic environment for the harbor app schema."""
from alembic import context

from harbor.db.models import Base
from harbor.db.session import engine


def include_object(obj, name, type_, reflected, compare_to):
    # scratch tables from ad-hoc backfills are never managed by migrations
    return not (type_ == "table" and name.startswith("tmp_"))


def run_migrations_online() -> None:
    with engine.connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=Base.metadata,
            compare_type=True,
            include_schemas=True,
            include_object=include_object,
        )
        with context.begin_transaction():
            context.run_migrations()


run_migrations_online()
