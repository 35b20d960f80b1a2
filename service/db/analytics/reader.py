"""The SQL store (service/db/stores.py): the analytics reads on the primary database, one snapshot
per answer, with the same methods as `service/db/clickhouse/reads.py`'s `ClickHouseReader`."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.orm import Session

from .. import locales
from ..engine import Database
from . import Window, export_page, has_learners, learners_page, manipulations, mistakes, parameters, timeseries
from . import token_cells as cells
from .funnel import durations_of, funnel
from .item_rollups import Sums, sums
from .rollup_refresh import catch_up


class SqlStore:
    """The primary database answers analytics from its rollups and the events after them."""

    queues_erasures = False  # its figures are the primary's own: the erasure deleted them

    def __init__(self, db: Database):
        self.db = db

    @contextmanager
    def reading(self) -> Iterator[SqlReader]:
        with self.db.snapshot() as session:
            yield SqlReader(session)

    def catch_up(self, tail: int) -> None:
        if tail:  # never when the setting is 0 (a read replica)
            catch_up(self.db, tail)

    def forget(self, platform_id: int, learner: str) -> None:
        """Nothing more: the primary's erasure took them out of the rollups."""

    def through(self, now: dt.datetime) -> dt.datetime:
        return now  # the source of truth is current through now


class SqlReader:
    def __init__(self, session: Session):
        self.session = session

    def timeseries(self, platform_id: int, bucket: str, group_by: str, window: Window, lesson: str | None) -> list:
        return timeseries(self.session, platform_id, bucket, group_by, window, lesson)

    def parameters(self, platform_id: int, lesson: str, window: Window) -> list:
        return parameters(self.session, platform_id, lesson, window)

    def manipulations(self, platform_id: int, lesson: str, window: Window) -> dict:
        return manipulations(self.session, platform_id, lesson, window)

    def token_cells(self, platform_id: int, lesson: str, window: Window) -> list:
        return cells(self.session, platform_id, lesson, window)

    def mistakes(self, platform_id: int, lesson: str, window: Window) -> dict:
        return mistakes(self.session, platform_id, lesson, window)

    def funnel(self, platform_id: int, lesson: str, checkpoint_ids: list[str], window: Window) -> dict:
        return funnel(self.session, platform_id, lesson, checkpoint_ids, window)

    def durations_of(
        self, platform_id: int, lesson: str, checkpoints: tuple[str, ...], quantiles: tuple[float, ...], window: Window
    ) -> dict[str, tuple[int, list[float]]]:
        return durations_of(self.session, platform_id, lesson, checkpoints, quantiles, window)

    def has_learners(self, platform_id: int, lesson: str, at_least: int) -> bool:
        return has_learners(self.session, platform_id, lesson, at_least)

    def learners_page(self, platform_id: int, lesson: str, after: str, limit: int, locale: str | None = None) -> list:
        return learners_page(self.session, platform_id, lesson, after, limit, locale)

    def item_sums(self, platform_id: int, lesson: str) -> Sums:
        return sums(self.session.connection(), platform_id, lesson)

    def export_page(self, platform_id: int, after: tuple[dt.datetime, int] | None, through: dt.datetime, limit: int):
        return export_page(self.session, platform_id, after, through, limit)

    def locales_of(self, platform_id: int, learners) -> dict[str, str]:
        return locales.of(self.session, platform_id, learners)

    def synced_through(self) -> dt.datetime | None:
        return None  # the source of truth: current through now
