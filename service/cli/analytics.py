"""`workbench analytics`: the ClickHouse analytics store's tables and its sync (docs/scaling.md)."""

from __future__ import annotations

import logging

import click

from .common import _database, _settings


@click.group()
def analytics() -> None:
    """The analytics store past one database, ClickHouse (WORKBENCH_ANALYTICS_URL; docs/scaling.md)."""


def _store():
    from ..db.clickhouse import ClickHouse

    url = _settings().analytics_url
    if not url:
        raise click.ClickException(
            "set WORKBENCH_ANALYTICS_URL (clickhouse://user:password@host:8123/db or chdb:///path)"
        )
    return ClickHouse(url)


@analytics.command("migrate")
def analytics_migrate() -> None:
    """Create or upgrade the analytics store's tables."""
    from ..db.clickhouse import AnalyticsUnavailable
    from ..db.clickhouse.schema import migrate

    try:
        applied = migrate(_store())
    except AnalyticsUnavailable as error:
        raise click.ClickException(str(error)) from None
    click.echo(f"applied versions {applied}" if applied else "the analytics store is up to date")


@analytics.command("sync")
@click.option("--follow", is_flag=True, help="Keep syncing (a compose service); otherwise one pass.")
@click.option("--interval", default=5.0, show_default=True, help="Seconds between passes with --follow.")
def analytics_sync(follow: bool, interval: float) -> None:
    """Copy the events, progress and erasures stored since the last sync (resumable, idempotent)."""
    from ..db.clickhouse import AnalyticsUnavailable
    from ..db.clickhouse.sync import SyncRunning, one_pass
    from ..db.clickhouse.sync import follow as follow_on

    store, db, keep = _store(), _database(), _settings().events_retention_months
    if follow:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
        follow_on(db, store, interval, keep_months=keep)  # for ever: a store out of reach is tried again each pass
    try:
        copied = one_pass(db, store, keep)
    except (AnalyticsUnavailable, SyncRunning) as error:
        raise click.ClickException(str(error)) from None
    click.echo(", ".join(f"{n} {what}" for what, n in sorted(copied.items()) if n) or "nothing new")
