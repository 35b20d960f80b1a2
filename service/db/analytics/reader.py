"""The analytics reads on the SQL store, one snapshot per answer: the same methods as
`service/db/clickhouse/reads.py`'s `ClickHouseReader`, so the API asks either store alike."""

from __future__ import annotations

import datetime as dt

from sqlalchemy.orm import Session

from .. import locales
from . import Window, export_page, has_learners, learners_page, manipulations, mistakes, parameters, timeseries
from . import token_cells as cells
from .funnel import durations_of, funnel
from .item_rollups import Sums, sums


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
