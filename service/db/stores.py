"""Where analytics answers come from: the SQL store (the primary database, its rollups) or the
ClickHouse store (WORKBENCH_ANALYTICS_URL), behind one protocol both implement and chosen here,
outside either. The primary database stays the source of truth."""

from __future__ import annotations

import datetime as dt
import threading
from contextlib import AbstractContextManager
from typing import Any, Protocol

from .analytics.reader import SqlStore
from .clickhouse import ClickHouseStore
from .clickhouse.sync import follow

IN_PROCESS_SYNC_SECONDS = 5.0


class AnalyticsStore(Protocol):
    """What the API asks of the store that answers analytics."""

    queues_erasures: bool  # an erasure is also queued for this store (it holds copies of events)

    def reading(self) -> AbstractContextManager[Any]:
        """The reads of one answer, every figure from one snapshot: a `SqlReader` or a `ClickHouseReader`,
        which have the same methods (tests/db/test_stores.py holds them to it)."""
        ...

    def catch_up(self, tail: int) -> None:
        """Bring the figures up to date first when more than `tail` events wait (0: never)."""
        ...

    def forget(self, platform_id: int, learner: str) -> None:
        """Hide an erased learner at once (the primary's erasure has already deleted them)."""
        ...

    def through(self, now: dt.datetime) -> dt.datetime:
        """Up to when the store holds every event."""
        ...


def store_of(app: Any) -> AnalyticsStore:
    """The app's analytics store, made on first use."""
    if "analytics_store" not in app.extensions:
        url = app.extensions["settings"].analytics_url
        db = app.extensions["db"]
        app.extensions["analytics_store"] = ClickHouseStore(url, db) if url else SqlStore(db)
    return app.extensions["analytics_store"]


def sync_in_background(app: Any) -> threading.Thread:
    """chDB: the one process that may open the store also keeps it current (a daemon thread)."""
    store = store_of(app)
    assert isinstance(store, ClickHouseStore)
    keep = app.extensions["settings"].events_retention_months
    thread = threading.Thread(
        target=follow,
        args=(app.extensions["db"], store.ch, IN_PROCESS_SYNC_SECONDS, None, keep),
        name="analytics-sync",
        daemon=True,
    )
    thread.start()
    return thread
