"""Recording events on PostgreSQL: one call of `workbench_record_events` (its whole text is
record_events.sql beside this file, installed by the head migration), so one round trip per
request: skip tombstoned ids, claim and insert the rest once, refuse the whole call on a
conflicting replay (SQLSTATE WB409), keep first visits and durations, record completions."""

from __future__ import annotations

import datetime as dt
from typing import Any

import orjson
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

from ...lessons import Lesson
from .core import EventConflict, NewEvent, RecordResult, completions_among

CONFLICT_SQLSTATE = "WB409"  # raised by workbench_record_events: ids stored with other content
RECORD_POSTGRESQL = text("SELECT workbench_record_events(:platform_id, CAST(:events AS json), :now)")


def record(
    conn: Connection,
    platform_id: int,
    events: list[NewEvent],
    lessons: dict[str, Lesson],
    rows: list[dict[str, Any]],
) -> RecordResult:
    params = {
        "platform_id": platform_id,
        "events": orjson.dumps(rows).decode(),
        "now": dt.datetime.now(dt.UTC),
    }
    try:
        outcome = conn.execute(RECORD_POSTGRESQL, params).scalar_one()
    except DBAPIError as exc:
        if getattr(exc.orig, "sqlstate", None) == CONFLICT_SQLSTATE:
            raise EventConflict(orjson.loads(exc.orig.diag.message_primary)) from None  # type: ignore[union-attr]
        raise
    created = set(outcome["created"])
    new = [e for e in events if e.event_id in created]
    wholes = {(learner, lesson, checkpoint) for learner, lesson, checkpoint in outcome["completed"]}
    return RecordResult(
        created=[e.event_id for e in new],
        replayed=outcome["replayed"],
        erased=outcome["erased"],
        completed=sorted(set(completions_among(new, lessons)) | wholes),
    )
