"""Reads behind xAPI: a platform's home page and its events, keyset-paged (the statement view and
the forwarder)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..db.tables import Event, Platform


@dataclass(frozen=True)
class StatementFilter:
    """What the xAPI query parameters select (None: no condition)."""

    learner: str | None = None
    since: dt.datetime | None = None  # stored after
    until: dt.datetime | None = None  # stored at or before
    lesson: str | None = None
    checkpoint: str | None = None
    ascending: bool = False


def home_page(session: Session, platform_id: int) -> str:
    return session.execute(select(Platform.home_page).where(Platform.id == platform_id)).scalar_one()


def events_page(session: Session, platform_id: int, where: StatementFilter, after: int | None, limit: int) -> list[Any]:
    """Up to `limit` event rows past the row id `after`, in the filter's order."""
    query = select(Event.__table__).where(Event.platform_id == platform_id)
    if where.learner is not None:
        query = query.where(Event.learner == where.learner)
    if where.since is not None:
        query = query.where(Event.stored_at > where.since)
    if where.until is not None:
        query = query.where(Event.stored_at <= where.until)
    if where.lesson is not None:
        query = query.where(Event.lesson == where.lesson)
    if where.checkpoint is not None:
        query = query.where(Event.checkpoint == where.checkpoint)
    if after is not None:
        query = query.where(Event.id > after if where.ascending else Event.id < after)
    order = Event.id.asc() if where.ascending else Event.id.desc()
    return list(session.execute(query.order_by(order).limit(limit)).all())


def events_after(session: Session, platform_id: int, after_row: int, settled: dt.datetime, limit: int) -> list[Any]:
    """The platform's events past row `after_row` stored by `settled`, oldest first (forwarding)."""
    query = (
        select(Event.__table__)
        .where(Event.platform_id == platform_id, Event.id > after_row, Event.stored_at <= settled)
        .order_by(Event.id)
        .limit(limit)
    )
    return list(session.execute(query).all())
