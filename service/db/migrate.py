"""Alembic driven from code, so `workbench db upgrade` works from any directory.

Migrations change the schema and import nothing of the application; the data a revision needs
made from what is already stored (the rollups of 0006) is made here, once, after the schema
has reached its head: `workbench db upgrade` runs both."""

from __future__ import annotations

from alembic import command
from alembic.config import Config

from ..config import ROOT
from .engine import ensure_sqlite_directory


def alembic_config(database_url: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(ROOT / "migrations"))
    cfg.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return cfg


def upgrade(database_url: str, revision: str = "head") -> None:
    ensure_sqlite_directory(database_url)
    before = current(database_url)
    command.upgrade(alembic_config(database_url), revision)
    after = current(database_url)
    if _passed(before, after, "0006"):
        _roll_up_what_is_stored(database_url)
    elif _passed(before, after, "0009"):
        _roll_up_manipulations(database_url)


def _passed(before: str | None, after: str | None, revision: str) -> bool:
    """Whether an upgrade from `before` to `after` applied `revision` (revisions are numbered)."""
    return after is not None and (before is None or before < revision) and after >= revision


def _roll_up_manipulations(database_url: str) -> None:
    """0009 counts the lesson's manipulations in the rollups: the events already rolled up are
    added to that dimension once (the refresh adds the later ones)."""
    from sqlalchemy import create_engine

    from .analytics.rollup_refresh import add_variant_upto_watermark
    from .analytics.rollups import variant

    engine = create_engine(database_url)
    try:
        with engine.begin() as conn:
            add_variant_upto_watermark(conn, variant("all", "manipulation"))
    finally:
        engine.dispose()


def _roll_up_what_is_stored(database_url: str) -> None:
    """0006's rollups start empty: count the exercise checks and roll up the events stored
    before it (the incremental refresh from watermark 0, in set-based SQL)."""
    from sqlalchemy import create_engine

    from .analytics.mistake_rollups import backfill
    from .analytics.rollup_refresh import refresh_on

    engine = create_engine(database_url)
    try:
        with engine.begin() as conn:
            backfill(conn)
            refresh_on(conn)
    finally:
        engine.dispose()


def downgrade(database_url: str, revision: str) -> None:
    command.downgrade(alembic_config(database_url), revision)


def current(database_url: str) -> str | None:
    from alembic.runtime.migration import MigrationContext
    from sqlalchemy import create_engine

    engine = create_engine(database_url)
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()
