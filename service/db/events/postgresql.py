"""Recording events on PostgreSQL: one call of `workbench_record_events` (its versions are
the migrations', migrations/stored.py assembles each), so one round trip per
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
# The same call, and the new events counted against their quotas in the same statement: the
# increments offered per event id are added for the ids the call created (service/db/quotas.py).
RECORD_AND_COUNT = text("""
    WITH outcome AS (SELECT workbench_record_events(:platform_id, CAST(:events AS json), :now) AS o),
    counted AS (
        INSERT INTO storage_usage (subject, window_seconds, window_start, events, bytes)
        SELECT c.subject, c.window_seconds, c.window_start, sum(c.events), sum(c.bytes)
        FROM outcome, json_to_recordset(CAST(:usage AS json)) AS c(
            event_id text, subject text, window_seconds integer, window_start bigint, events bigint, bytes bigint)
        WHERE c.event_id IN (SELECT json_array_elements_text(outcome.o -> 'created'))
        GROUP BY c.subject, c.window_seconds, c.window_start
        ORDER BY c.subject, c.window_seconds, c.window_start
        ON CONFLICT (subject, window_seconds, window_start)
        DO UPDATE SET events = storage_usage.events + excluded.events, bytes = storage_usage.bytes + excluded.bytes
    )
    SELECT o FROM outcome
""")


def record(
    conn: Connection,
    platform_id: int,
    events: list[NewEvent],
    lessons: dict[str, Lesson],
    rows: list[dict[str, Any]],
    usage: dict[str, list[dict[str, Any]]] | None = None,
) -> RecordResult:
    """Record the events; `usage`: the quota increments each event id makes if it is new."""
    params = {
        "platform_id": platform_id,
        "events": orjson.dumps(rows).decode(),
        "now": dt.datetime.now(dt.UTC),
    }
    offered = [{"event_id": i, **row} for i, part in (usage or {}).items() for row in part]
    if offered:
        params["usage"] = orjson.dumps(offered).decode()
    try:
        outcome = conn.execute(RECORD_AND_COUNT if offered else RECORD_POSTGRESQL, params).scalar_one()
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
