"""Recording progress events exactly once, checkpoint completion, and erasure.

Conflicts are found inside the insert transaction (`INSERT ... ON CONFLICT DO NOTHING
RETURNING`), never by reading first. A batch is one transaction: any conflict rolls it back.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson
from sqlalchemy import text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

from ..lessons import Checkpoint, Lesson
from . import events_sqlite
from .engine import Database

RETRYABLE_SQLSTATES = {"40001", "40P01"}  # serialization failure, deadlock detected
CONFLICT_SQLSTATE = "WB409"  # raised by workbench_record_events: ids stored with other content
MAX_ATTEMPTS = 4


class EventConflict(Exception):
    """These event ids are already stored with different content."""

    def __init__(self, event_ids: list[str]):
        super().__init__(", ".join(event_ids))
        self.event_ids = event_ids


@dataclass(frozen=True)
class NewEvent:
    event_id: str
    learner: str
    lesson: str
    checkpoint: str | None
    event: str
    instance_id: str | None
    data: dict[str, Any]
    occurred_at: dt.datetime

    def canonical(self) -> dict[str, Any]:
        return {
            "id": self.event_id,
            **described(self),
            "occurred_at": self.occurred_at.astimezone(dt.UTC).isoformat(timespec="microseconds"),
        }

    @property
    def content_hash(self) -> str:
        return hashlib.sha256(orjson.dumps(self.canonical(), option=orjson.OPT_SORT_KEYS)).hexdigest()


def described(e: NewEvent | Any) -> dict[str, Any]:
    """What an event says, a new one or a stored row alike: who, where, what, and its data."""
    return {
        "learner": e.learner,
        "lesson": e.lesson,
        "checkpoint": e.checkpoint,
        "event": e.event,
        "instance_id": e.instance_id,
        "data": e.data,
    }


@dataclass
class RecordResult:
    created: list[str] = field(default_factory=list)
    replayed: list[str] = field(default_factory=list)
    erased: list[str] = field(default_factory=list)  # tombstoned ids: acknowledged, not stored
    completed: list[tuple[str, str, str]] = field(default_factory=list)  # (learner, lesson, checkpoint)

    def statuses(self) -> dict[str, str]:
        status = {i: "duplicate" for i in self.replayed}
        status.update({i: "erased" for i in self.erased})
        status.update({i: "created" for i in self.created})
        return status


def tombstone(platform_id: int, event_id: str) -> str:
    return hashlib.sha256(f"{platform_id}:{event_id}".encode()).hexdigest()


def dialect_insert(dialect: str, table):
    """The dialect's INSERT, which has ON CONFLICT."""
    return (postgresql.insert if dialect == "postgresql" else sqlite.insert)(table)


def verification(checkpoint: Checkpoint | None, data: dict[str, Any]) -> str | None:
    """How a test checkpoint's completion is known: "verified" only from the server's own challenge
    check (clients may not send `data.verification`), else "reported"; None for other checkpoints."""
    if checkpoint is None or checkpoint.requires != "passing-tests":
        return None
    return "verified" if data.get("verification") == "verified" else "reported"


def write_events(db: Database, platform_id: int, events: list[NewEvent], lessons: dict[str, Lesson]) -> RecordResult:
    """Store new events, acknowledge identical replays, reject them all on any conflict: one
    transaction (deadlocks and serialization failures are retried). Requests go through
    `service.db.ingest.record_events`, which groups concurrent ones."""
    events = sorted(events, key=lambda e: e.event_id)  # one lock order for every writer
    # Hashes and the payload are made before the transaction: SQLite's writer lock (and a
    # PostgreSQL connection) is then held for the statements alone, while another worker prepares.
    rows = _payload_rows(platform_id, events, lessons, sqlite=db.is_sqlite)
    for attempt in range(1, MAX_ATTEMPTS + 1):
        try:
            if db.is_sqlite:
                with db.sqlite_transaction() as raw:
                    return _record_sqlite(raw, platform_id, events, lessons, rows)
            with db.write_statement() as conn:
                return _record_postgresql(conn, platform_id, events, lessons, rows)
        except DBAPIError as exc:
            if getattr(exc.orig, "sqlstate", None) not in RETRYABLE_SQLSTATES or attempt == MAX_ATTEMPTS:
                raise
            time.sleep(0.01 * 2**attempt)
    raise AssertionError("unreachable")


def record_events_in(
    conn: Connection, platform_id: int, events: list[NewEvent], lessons: dict[str, Lesson]
) -> RecordResult:
    """`record_events` inside a transaction the caller holds (one transaction per user action).

    PostgreSQL: one call of `workbench_record_events` (migration 0005), one round trip. SQLite:
    the same steps as a few statements (service/db/events_sqlite.py) on the driver's connection."""
    events = sorted(events, key=lambda e: e.event_id)
    postgresql = conn.dialect.name == "postgresql"
    rows = _payload_rows(platform_id, events, lessons, sqlite=not postgresql)
    if postgresql:
        return _record_postgresql(conn, platform_id, events, lessons, rows)
    raw = conn.connection.driver_connection
    assert isinstance(raw, sqlite3.Connection)
    return _record_sqlite(raw, platform_id, events, lessons, rows)


def _payload_rows(
    platform_id: int, events: list[NewEvent], lessons: dict[str, Lesson], sqlite: bool
) -> list[dict[str, Any]]:
    """The events as the database reads them: hashes made here, times in the column's own
    format; for PostgreSQL's function also the checkpoint each completes (the lesson's rules live
    in Python; on SQLite Python passes the completions themselves)."""
    rows = []
    for ord_, e in enumerate(events):
        lesson = lessons.get(e.lesson)
        checkpoint = None if sqlite or lesson is None else lesson.completes(e.event, e.checkpoint, e.instance_id)
        advanced = lesson.advances(e.event, e.checkpoint, e.instance_id, e.data) if lesson else None
        at = e.occurred_at.astimezone(dt.UTC)
        rows.append(
            {
                "ord": ord_,
                "event_id": e.event_id,
                **described(e),
                "occurred_at": _sqlite_time(at) if sqlite else at.isoformat(),
                "content_hash": e.content_hash,
                "tombstone": tombstone(platform_id, e.event_id),
                "completes": checkpoint.id if checkpoint else None,
                "verification": verification(checkpoint, e.data),
                "advances": advanced[0].id if advanced else None,
                "manipulation": advanced[1] if advanced else None,
                "required": ",".join(advanced[0].manipulations) if advanced else None,
            }
        )
    return rows


def _sqlite_time(at: dt.datetime) -> str:
    """How SQLAlchemy's DateTime stores a (naive UTC) time on SQLite."""
    return at.replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")


RECORD_POSTGRESQL = text("SELECT workbench_record_events(:platform_id, CAST(:events AS json), :now)")


def _record_postgresql(
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


def _record_sqlite(
    raw: sqlite3.Connection,
    platform_id: int,
    events: list[NewEvent],
    lessons: dict[str, Lesson],
    rows: list[dict[str, Any]],
) -> RecordResult:
    now = _sqlite_time(dt.datetime.now(dt.UTC))
    erased = set(events_sqlite.tombstoned(raw, platform_id, [row["tombstone"] for row in rows]))
    stored = events_sqlite.stored_hashes(raw, platform_id, [e.event_id for e in events])
    conflicts = sorted(e.event_id for e in events if e.event_id in stored and stored[e.event_id] != e.content_hash)
    if conflicts:
        raise EventConflict(conflicts)  # leaving the transaction block rolls everything back
    fresh = [row for row in rows if row["tombstone"] not in erased and row["event_id"] not in stored]
    inserted = events_sqlite.insert_events(raw, platform_id, fresh, now)
    new = [e for e in events if e.event_id in inserted]
    completed = completions_among(new, lessons)
    advancing = [row for row in fresh if row["manipulation"] is not None]
    wholes = events_sqlite.record_manipulations(raw, platform_id, advancing) if advancing else []
    result = RecordResult(
        created=[e.event_id for e in new],
        replayed=[e.event_id for e in events if e.event_id in stored],
        erased=[row["event_id"] for row in rows if row["tombstone"] in erased],
        completed=sorted(
            set(completed) | {(str(w["learner"]), str(w["lesson"]), str(w["checkpoint"])) for w in wholes}
        ),
    )
    if new:
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
        events_sqlite.record_visits_and_progress(
            raw,
            platform_id,
            [{"lesson": lesson, "learner": learner, "at": first} for (lesson, learner), first in firsts.items()],
            completions,
        )
    return result


def completions_among(events: Iterable[NewEvent], lessons: dict[str, Lesson]) -> dict[tuple[str, str, str], NewEvent]:
    """The earliest completing event per (learner, lesson, checkpoint) among these events."""
    earliest: dict[tuple[str, str, str], NewEvent] = {}
    for e in events:
        lesson = lessons.get(e.lesson)
        checkpoint = lesson.completes(e.event, e.checkpoint, e.instance_id) if lesson else None
        if checkpoint is None:
            continue
        key = (e.learner, e.lesson, checkpoint.id)
        if key not in earliest or e.occurred_at < earliest[key].occurred_at:
            earliest[key] = e
    return earliest
