"""Alembic environment: the tables' metadata (service/db/tables.py), batch mode on SQLite."""

import sys
from pathlib import Path

from alembic import context
from sqlalchemy import create_engine, pool

from service.db import tables  # noqa: F401  (registers every table on Base.metadata)
from service.db.base import Base
from service.db.types import UTCDateTime

sys.path.insert(0, str(Path(__file__).parent))  # migrations/stored.py: the stored function's versions
config = context.config
target_metadata = Base.metadata


def run_migrations() -> None:
    url = config.get_main_option("sqlalchemy.url")
    connectable = config.attributes.get("connection")
    if connectable is not None:
        _run(connectable, url)
        return
    engine = create_engine(url, poolclass=pool.NullPool)
    with engine.connect() as connection:
        _run(connection, url)
    engine.dispose()


def _render_item(type_, obj, autogen_context):
    """Render our column types as plain SQLAlchemy ones, so migrations import nothing of ours."""
    if type_ == "type" and isinstance(obj, UTCDateTime):
        return "sa.DateTime(timezone=True)"
    return False


def _run(connection, url: str) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=url.startswith("sqlite"),
        compare_type=True,
        render_item=_render_item,
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    context.configure(url=config.get_main_option("sqlalchemy.url"), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    run_migrations()
