"""The analytics store past one database (WORKBENCH_ANALYTICS_URL): ClickHouse tables copied from
the primary database by `workbench analytics sync`, and every analytics read answered from them.
The primary database stays the source of truth."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..analytics.reader import SqlReader
from ..engine import Database
from .connection import AnalyticsUnavailable, ClickHouse
from .reads import ClickHouseReader
from .sync import follow

__all__ = ["AnalyticsUnavailable", "ClickHouse", "reading", "store_of", "sync_in_background"]

IN_PROCESS_SYNC_SECONDS = 5.0


def store_of(app: Any) -> ClickHouse | None:
    """The app's analytics store, made on first use (None: the SQL store answers)."""
    url = app.extensions["settings"].analytics_url
    if not url:
        return None
    if "analytics_store" not in app.extensions:
        app.extensions["analytics_store"] = ClickHouse(url)
    return app.extensions["analytics_store"]


@contextmanager
def reading(db: Database, store: ClickHouse | None) -> Iterator[SqlReader | ClickHouseReader]:
    """The reads of one answer: from ClickHouse when configured, else from one SQL snapshot."""
    if store is not None:
        yield ClickHouseReader(store)
        return
    with db.snapshot() as session:
        yield SqlReader(session)


def sync_in_background(app: Any) -> threading.Thread:
    """chDB: the one process that may open the store also keeps it current (a daemon thread)."""
    store = store_of(app)
    assert store is not None

    keep = app.extensions["settings"].events_retention_months
    thread = threading.Thread(
        target=follow,
        args=(app.extensions["db"], store, IN_PROCESS_SYNC_SECONDS, None, keep),
        name="analytics-sync",
        daemon=True,
    )
    thread.start()
    return thread
