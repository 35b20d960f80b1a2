"""The analytics store past one database (WORKBENCH_ANALYTICS_URL): ClickHouse tables copied from
the primary database by `workbench analytics sync`, and every analytics read answered from them.
The primary database stays the source of truth."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .connection import AnalyticsUnavailable, ClickHouse
from .reads import ClickHouseReader
from .sync import forget

__all__ = ["AnalyticsUnavailable", "ClickHouse", "ClickHouseStore"]

log = logging.getLogger(__name__)


class ClickHouseStore:
    """ClickHouse answers analytics from the events the sync copied (service/db/stores.py)."""

    queues_erasures = True  # it holds copies: the sync erases them from the queue the erasure wrote

    def __init__(self, url: str, db: Any):
        self.ch, self.db = ClickHouse(url), db  # the primary database: erasures reach the item sums from it

    @contextmanager
    def reading(self) -> Iterator[ClickHouseReader]:
        yield ClickHouseReader(self.ch)

    def catch_up(self, tail: int) -> None:
        """Nothing: the sync keeps it current."""

    def forget(self, platform_id: int, learner: str) -> None:
        """Hide the learner at once; when the store cannot be reached, the sync erases them from the
        queue the erasure wrote (the answer does not wait for it)."""
        try:
            forget(self.ch, platform_id, learner, self.db)
        except AnalyticsUnavailable as error:
            log.warning("erasure queued for the analytics store's next sync: %s", error)

    def through(self, now: dt.datetime) -> dt.datetime:
        """When the last sync began: events committed before it are here."""
        with self.reading() as reads:
            synced = reads.synced_through()
        return min(now, synced or dt.datetime.fromtimestamp(0, dt.UTC))
