"""Recording events on SQLite: the steps of PostgreSQL's `workbench_record_events` as a few
statements over the same payload rows, on the driver's connection inside the caller's `BEGIN
IMMEDIATE` transaction. Times are SQLAlchemy's SQLite text ('YYYY-MM-DD HH:MM:SS.ffffff', UTC),
so text order is time order and durations are computed exactly, in whole microseconds, as
Python's `timedelta.total_seconds()` computes them."""

from __future__ import annotations

import datetime as dt
import sqlite3
from typing import Any

import orjson

from ...lessons import Lesson
from .core import EventConflict, NewEvent, RecordResult, completions_among, sqlite_time, verification


def _seconds(later: str, earlier: str) -> str:
    """SQL for `later - earlier` in seconds, exact to the microsecond: whole seconds from the
    text without its fraction (SQLite's own date arithmetic rounds to milliseconds, so
    '...:44.9995' would count as second 45), microseconds from the fraction's digits."""
    return (
        f"(((strftime('%s', substr({later}, 1, 19)) - strftime('%s', substr({earlier}, 1, 19))) * 1000000"
        f" + (CAST(substr({later}, 21, 6) AS INTEGER) - CAST(substr({earlier}, 21, 6) AS INTEGER)))"
        " / 1000000.0)"
    )


INSERT_EVENTS = """
    INSERT INTO events (platform_id, event_id, learner, lesson, checkpoint, event, instance_id, item, data,
                        occurred_at, stored_at, content_hash)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""

# The new events' first visits and completions come computed (Python has them anyway):
# one row per (lesson, learner) and per (learner, lesson, checkpoint), not one per event.
_FIRST = """
    SELECT f.value ->> 'lesson' AS lesson, f.value ->> 'learner' AS learner, f.value ->> 'at' AS at
    FROM json_each(:firsts) AS f
"""

# Learners whose start moves earlier (CROSS JOIN: SQLite keeps the given rows as the outer loop).
MOVED_STARTS = f"""
    SELECT f.lesson, f.learner, f.at
    FROM ({_FIRST}) AS f
    CROSS JOIN learner_lessons l
    WHERE l.platform_id = :platform_id AND l.lesson = f.lesson AND l.learner = f.learner AND f.at < l.first_event_at
"""

MOVE_DURATIONS = f"""
    UPDATE checkpoint_progress
    SET seconds_from_start = {_seconds("completed_at", ":at")}
    WHERE platform_id = :platform_id AND learner = :learner AND lesson = :lesson
"""

UPSERT_FIRST_VISITS = f"""
    INSERT INTO learner_lessons (platform_id, lesson, learner, first_event_at)
    SELECT :platform_id, f.lesson, f.learner, f.at FROM ({_FIRST}) AS f WHERE true
    ORDER BY f.lesson, f.learner
    ON CONFLICT (platform_id, lesson, learner) DO UPDATE
        SET first_event_at = excluded.first_event_at
        WHERE excluded.first_event_at < learner_lessons.first_event_at
"""

_EARLIER = "excluded.completed_at < checkpoint_progress.completed_at"
UPSERT_PROGRESS = f"""
    INSERT INTO checkpoint_progress (platform_id, learner, lesson, checkpoint, completed_at, event_id,
                                     seconds_from_start, verification)
    SELECT :platform_id, c.learner, c.lesson, c.checkpoint, c.at, c.event_id,
           {_seconds("c.at", "l.first_event_at")}, c.verification
    FROM (
        SELECT e.value ->> 'learner' AS learner, e.value ->> 'lesson' AS lesson,
               e.value ->> 'checkpoint' AS checkpoint, e.value ->> 'at' AS at,
               e.value ->> 'event_id' AS event_id, e.value ->> 'verification' AS verification
        FROM json_each(:completions) AS e
    ) AS c
    JOIN learner_lessons l ON l.platform_id = :platform_id AND l.lesson = c.lesson AND l.learner = c.learner
    WHERE true
    ORDER BY c.learner, c.lesson, c.checkpoint
    ON CONFLICT (platform_id, learner, lesson, checkpoint) DO UPDATE SET
        completed_at = CASE WHEN {_EARLIER} THEN excluded.completed_at ELSE checkpoint_progress.completed_at END,
        event_id = CASE WHEN {_EARLIER} THEN excluded.event_id ELSE checkpoint_progress.event_id END,
        seconds_from_start = CASE WHEN {_EARLIER}
                             THEN excluded.seconds_from_start ELSE checkpoint_progress.seconds_from_start END,
        verification = CASE WHEN {_EARLIER} THEN excluded.verification ELSE checkpoint_progress.verification END
"""


def insert_events(raw: sqlite3.Connection, platform_id: int, rows: list[dict], now: str) -> set[str]:
    """Insert these payload rows (events.py: neither stored nor tombstoned, as the caller found
    inside this same BEGIN IMMEDIATE transaction, so no other writer can add one meanwhile);
    their ids. Bound parameters, not json_each: a third less of SQLite's time per event."""
    raw.executemany(
        INSERT_EVENTS,
        [
            (
                platform_id,
                r["event_id"],
                r["learner"],
                r["lesson"],
                r["checkpoint"],
                r["event"],
                r["instance_id"],
                r["item"],
                orjson.dumps(r["data"]).decode(),
                r["occurred_at"],
                now,
                r["content_hash"],
            )
            for r in rows
        ],
    )
    return {r["event_id"] for r in rows}


def record_visits_and_progress(
    raw: sqlite3.Connection, platform_id: int, firsts: list[dict[str, str]], completions: list[dict[str, str | None]]
) -> None:
    """For newly stored events: first visits, given as each (lesson, learner)'s earliest new
    event (moving durations when a start moves earlier), then each checkpoint's earliest
    completing new event."""
    params = {"platform_id": platform_id, "firsts": orjson.dumps(firsts).decode()}
    moved = raw.execute(MOVED_STARTS, params).fetchall()
    if moved:
        raw.executemany(
            MOVE_DURATIONS,
            [
                {"platform_id": platform_id, "lesson": lesson, "learner": learner, "at": at}
                for lesson, learner, at in moved
            ],
        )
    raw.execute(UPSERT_FIRST_VISITS, params)
    if completions:
        raw.execute(UPSERT_PROGRESS, {"platform_id": platform_id, "completions": orjson.dumps(completions).decode()})


UPSERT_MANIPULATIONS = """
    INSERT INTO learner_manipulations (platform_id, learner, lesson, checkpoint, manipulation, done_at, event_id)
    VALUES (?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (platform_id, learner, lesson, checkpoint, manipulation) DO UPDATE
        SET done_at = excluded.done_at, event_id = excluded.event_id
        WHERE excluded.done_at < learner_manipulations.done_at
"""

# The last-done manipulation of a (learner, lesson, checkpoint), and how many of the required are done.
WHOLE = """
    SELECT count(*), max(done_at),
           (SELECT m2.event_id FROM learner_manipulations m2
            WHERE m2.platform_id = m.platform_id AND m2.learner = m.learner AND m2.lesson = m.lesson
              AND m2.checkpoint = m.checkpoint AND m2.manipulation IN (SELECT value FROM json_each(:required))
            ORDER BY m2.done_at DESC, m2.event_id DESC LIMIT 1)
    FROM learner_manipulations m
    WHERE m.platform_id = :platform_id AND m.learner = :learner AND m.lesson = :lesson AND m.checkpoint = :checkpoint
      AND m.manipulation IN (SELECT value FROM json_each(:required))
"""


def record_manipulations(raw: sqlite3.Connection, platform_id: int, rows: list[dict]) -> list[dict[str, str | None]]:
    """Keep each manipulation's earliest report (rows: new events that report one); the
    completions of checkpoints whose every manipulation is now done, at the moment the last of
    them was first done (for UPSERT_PROGRESS)."""
    raw.executemany(
        UPSERT_MANIPULATIONS,
        sorted(
            (platform_id, r["learner"], r["lesson"], r["advances"], r["manipulation"], r["occurred_at"], r["event_id"])
            for r in rows
        ),
    )
    wholes = []
    for learner, lesson, checkpoint, required in sorted(
        {(r["learner"], r["lesson"], r["advances"], r["required"]) for r in rows}
    ):
        needed = required.split(",")
        params = {"platform_id": platform_id, "learner": learner, "lesson": lesson, "checkpoint": checkpoint}
        count, at, event_id = raw.execute(WHOLE, {**params, "required": orjson.dumps(needed).decode()}).fetchone()
        if count == len(needed):
            wholes.append(
                {
                    "learner": learner,
                    "lesson": lesson,
                    "checkpoint": checkpoint,
                    "at": at,
                    "event_id": event_id,
                    "verification": None,
                }
            )
    return wholes


def tombstoned(raw: sqlite3.Connection, platform_id: int, hashes: list[str]) -> list[str]:
    """Which of these tombstone hashes are stored (events of erased learners)."""
    rows = raw.execute(
        "SELECT event_hash FROM erased_events WHERE platform_id = ? AND event_hash IN (SELECT value FROM json_each(?))",
        (platform_id, orjson.dumps(hashes).decode()),
    )
    return [row[0] for row in rows]


def stored_hashes(raw: sqlite3.Connection, platform_id: int, event_ids: list[str]) -> dict[str, str]:
    """event id -> the content hash stored under it."""
    rows = raw.execute(
        "SELECT event_id, content_hash FROM events"
        " WHERE platform_id = ? AND event_id IN (SELECT value FROM json_each(?))",
        (platform_id, orjson.dumps(event_ids).decode()),
    )
    return dict(rows.fetchall())


def record(
    raw: sqlite3.Connection,
    platform_id: int,
    events: list[NewEvent],
    lessons: dict[str, Lesson],
    rows: list[dict[str, Any]],
) -> RecordResult:
    """Within the caller's BEGIN IMMEDIATE: refuse on a conflict (nothing written), insert what
    is new, then first visits, manipulations and completions for the new events."""
    erased = set(tombstoned(raw, platform_id, [row["tombstone"] for row in rows]))
    stored = stored_hashes(raw, platform_id, [e.event_id for e in events])
    conflicts = sorted(e.event_id for e in events if e.event_id in stored and stored[e.event_id] != e.content_hash)
    if conflicts:
        raise EventConflict(conflicts)  # leaving the transaction block rolls everything back
    fresh = [row for row in rows if row["tombstone"] not in erased and row["event_id"] not in stored]
    inserted = insert_events(raw, platform_id, fresh, sqlite_time(dt.datetime.now(dt.UTC)))
    new = [e for e in events if e.event_id in inserted]
    completed = completions_among(new, lessons)
    advancing = [row for row in fresh if row["manipulation"] is not None]
    wholes = record_manipulations(raw, platform_id, advancing) if advancing else []
    if new:
        _progress(raw, platform_id, new, rows, lessons, completed, wholes)
    return RecordResult(
        created=[e.event_id for e in new],
        replayed=[e.event_id for e in events if e.event_id in stored],
        erased=[row["event_id"] for row in rows if row["tombstone"] in erased],
        completed=sorted(
            set(completed) | {(str(w["learner"]), str(w["lesson"]), str(w["checkpoint"])) for w in wholes}
        ),
    )


def _progress(raw, platform_id, new, rows, lessons, completed, wholes) -> None:
    """Each (lesson, learner)'s earliest new event, and the completions the new events make."""
    at = {row["event_id"]: row["occurred_at"] for row in rows}  # as stored: text in time order
    firsts: dict[tuple[str, str], str] = {}
    for e in new:
        key = (e.lesson, e.learner)
        firsts[key] = min(firsts.get(key, at[e.event_id]), at[e.event_id])
    completions = [
        {
            "learner": learner,
            "lesson": lesson,
            "checkpoint": checkpoint,
            "at": at[e.event_id],
            "event_id": e.event_id,
            "verification": verification(lessons[lesson].checkpoint(checkpoint), e.data),
        }
        for (learner, lesson, checkpoint), e in completed.items()
    ] + wholes
    visits = [{"lesson": lesson, "learner": learner, "at": first} for (lesson, learner), first in firsts.items()]
    record_visits_and_progress(raw, platform_id, visits, completions)
