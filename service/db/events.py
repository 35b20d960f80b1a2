"""Recording progress events exactly once, checkpoint completion, and erasure.

Conflicts are found inside the insert transaction (`INSERT ... ON CONFLICT DO NOTHING
RETURNING`), never by reading first. A batch is one transaction: any conflict rolls it back.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import orjson
from sqlalchemy import bindparam, case, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

from ..lessons import Checkpoint, Lesson
from .engine import Database
from .models import CheckpointProgress, ErasedEvent, Event, LearnerLesson

RETRYABLE_SQLSTATES = {"40001", "40P01"}  # serialization failure, deadlock detected
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
            "learner": self.learner,
            "lesson": self.lesson,
            "checkpoint": self.checkpoint,
            "event": self.event,
            "instance_id": self.instance_id,
            "data": self.data,
            "occurred_at": self.occurred_at.astimezone(dt.UTC).isoformat(timespec="microseconds"),
        }

    @property
    def content_hash(self) -> str:
        return hashlib.sha256(orjson.dumps(self.canonical(), option=orjson.OPT_SORT_KEYS)).hexdigest()


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


def _insert(dialect: str, table):
    return (postgresql.insert if dialect == "postgresql" else sqlite.insert)(table)


def _earliest_completion_wins(dialect: str):
    """Insert a completion; on a conflict keep whichever completing event happened first."""
    progress = CheckpointProgress.__table__
    upsert = _insert(dialect, progress)
    earlier = upsert.excluded.completed_at < progress.c.completed_at
    kept = ("completed_at", "event_id", "seconds_from_start", "verification")
    return upsert.on_conflict_do_update(
        index_elements=["platform_id", "learner", "lesson", "checkpoint"],
        set_={name: case((earlier, upsert.excluded[name]), else_=progress.c[name]) for name in kept},
    )


@lru_cache(maxsize=4)
def _statements(dialect: str) -> dict[str, Any]:
    """Built once per dialect, executed with parameter lists: compiled once, cached by SQLAlchemy."""
    events = Event.__table__
    insert_events = (
        _insert(dialect, events)
        .on_conflict_do_nothing(index_elements=["platform_id", "event_id"])
        .returning(events.c.event_id)
    )
    visits = LearnerLesson.__table__
    first = _insert(dialect, visits)
    first = first.on_conflict_do_update(
        index_elements=["platform_id", "lesson", "learner"],
        set_={
            "first_event_at": case(
                (first.excluded.first_event_at < visits.c.first_event_at, first.excluded.first_event_at),
                else_=visits.c.first_event_at,
            )
        },
    )
    tombstones = select(ErasedEvent.__table__.c.event_hash).where(
        ErasedEvent.__table__.c.platform_id == bindparam("platform_id"),
        ErasedEvent.__table__.c.event_hash.in_(bindparam("hashes", expanding=True)),
    )
    first_visits = select(visits.c.learner, visits.c.first_event_at).where(
        visits.c.platform_id == bindparam("platform_id"),
        visits.c.lesson == bindparam("lesson"),
        visits.c.learner.in_(bindparam("learners", expanding=True)),
    )
    stored = select(events.c.event_id, events.c.content_hash).where(
        events.c.platform_id == bindparam("platform_id"), events.c.event_id.in_(bindparam("ids", expanding=True))
    )
    return {
        "insert_events": insert_events,
        "upsert_progress": _earliest_completion_wins(dialect),
        "upsert_first_visit": first,
        "first_visits": first_visits,
        "tombstones": tombstones,
        "stored": stored,
    }


def verification(checkpoint: Checkpoint | None, data: dict[str, Any]) -> str | None:
    """How a test checkpoint's completion is known: "verified" only from the server's own challenge
    check (clients may not send `data.verification`), else "reported"; None for other checkpoints."""
    if checkpoint is None or checkpoint.requires != "passing-tests":
        return None
    return "verified" if data.get("verification") == "verified" else "reported"


def record_events(db: Database, platform_id: int, events: list[NewEvent], lessons: dict[str, Lesson]) -> RecordResult:
    """Store new events, acknowledge identical replays, reject the whole batch on any conflict."""
    for attempt in range(1, MAX_ATTEMPTS + 1):
        try:
            with db.write() as session:
                return record_events_in(session.connection(), platform_id, events, lessons)
        except DBAPIError as exc:
            if getattr(exc.orig, "sqlstate", None) not in RETRYABLE_SQLSTATES or attempt == MAX_ATTEMPTS:
                raise
            time.sleep(0.01 * 2**attempt)
    raise AssertionError("unreachable")


def record_events_in(
    conn: Connection, platform_id: int, events: list[NewEvent], lessons: dict[str, Lesson]
) -> RecordResult:
    """`record_events` inside a transaction the caller holds (one transaction per user action)."""
    events = sorted(events, key=lambda e: e.event_id)  # one lock order for every writer
    sql = _statements(conn.dialect.name)
    result = RecordResult()
    hashes = {e.event_id: e.content_hash for e in events}
    stones = {tombstone(platform_id, e.event_id): e.event_id for e in events}
    erased = conn.execute(sql["tombstones"], {"platform_id": platform_id, "hashes": list(stones)}).scalars()
    result.erased = [stones[h] for h in erased]
    skip = set(result.erased)
    fresh = [e for e in events if e.event_id not in skip]
    if not fresh:
        return result
    inserted = set(conn.execute(sql["insert_events"], _event_rows(platform_id, fresh, hashes)).scalars())
    others = [e.event_id for e in fresh if e.event_id not in inserted]
    if others:
        stored = dict(conn.execute(sql["stored"], {"platform_id": platform_id, "ids": others}).all())
        conflicts = sorted(i for i in others if stored.get(i) != hashes[i])
        if conflicts:
            raise EventConflict(conflicts)  # leaving the transaction block rolls everything back
    result.created = [e.event_id for e in fresh if e.event_id in inserted]
    result.replayed = others
    new = [e for e in fresh if e.event_id in inserted]
    first_seen = _first_visits(conn, sql, platform_id, new)
    completions = _completions(new, lessons)
    if completions:
        conn.execute(sql["upsert_progress"], _progress_rows(platform_id, completions, first_seen, lessons))
        result.completed = sorted(completions)
    return result


def _event_rows(platform_id: int, events: list[NewEvent], hashes: dict[str, str]) -> list[dict[str, Any]]:
    now = dt.datetime.now(dt.UTC)
    return [
        {
            "platform_id": platform_id,
            "event_id": e.event_id,
            "learner": e.learner,
            "lesson": e.lesson,
            "checkpoint": e.checkpoint,
            "event": e.event,
            "instance_id": e.instance_id,
            "data": e.data,
            "occurred_at": e.occurred_at,
            "stored_at": now,
            "content_hash": hashes[e.event_id],
        }
        for e in events
    ]


def _progress_rows(
    platform_id: int,
    completions: dict[tuple[str, str, str], NewEvent],
    first_seen: dict[tuple[str, str], dt.datetime],
    lessons: dict[str, Lesson],
) -> list[dict[str, Any]]:
    return [
        {
            "platform_id": platform_id,
            "learner": learner,
            "lesson": lesson,
            "checkpoint": checkpoint,
            "completed_at": e.occurred_at,
            "event_id": e.event_id,
            "seconds_from_start": (e.occurred_at - first_seen[(lesson, learner)]).total_seconds(),
            "verification": verification(lessons[lesson].checkpoint(checkpoint), e.data),
        }
        for (learner, lesson, checkpoint), e in completions.items()
    ]


def _first_visits(
    conn: Connection, sql: dict[str, Any], platform_id: int, new: list[NewEvent]
) -> dict[tuple[str, str], dt.datetime]:
    """Record each learner's first event per lesson; returns (lesson, learner) -> first event time.

    When an offline event moves a learner's start earlier, their stored durations move too.
    """
    batch_first: dict[tuple[str, str], dt.datetime] = {}
    for e in new:
        key = (e.lesson, e.learner)
        batch_first[key] = min(batch_first.get(key, e.occurred_at), e.occurred_at)
    if not batch_first:
        return {}
    before: dict[tuple[str, str], dt.datetime] = {}
    for lesson in {lesson for lesson, _ in batch_first}:
        learners = [learner for (les, learner) in batch_first if les == lesson]
        for learner, at in conn.execute(
            sql["first_visits"], {"platform_id": platform_id, "lesson": lesson, "learners": learners}
        ):
            before[(lesson, learner)] = at if at.tzinfo else at.replace(tzinfo=dt.UTC)
    conn.execute(
        sql["upsert_first_visit"],
        [
            {"platform_id": platform_id, "lesson": lesson, "learner": learner, "first_event_at": at}
            for (lesson, learner), at in sorted(batch_first.items())
        ],
    )
    first = {key: min(at, before.get(key, at)) for key, at in batch_first.items()}
    moved = [key for key, at in first.items() if key in before and at < before[key]]
    progress = CheckpointProgress.__table__
    for lesson, learner in moved:
        rows = conn.execute(
            select(progress.c.id, progress.c.completed_at).where(
                progress.c.platform_id == platform_id, progress.c.lesson == lesson, progress.c.learner == learner
            )
        ).all()
        for row_id, completed_at in rows:
            completed_at = completed_at if completed_at.tzinfo else completed_at.replace(tzinfo=dt.UTC)
            seconds = (completed_at - first[(lesson, learner)]).total_seconds()
            conn.execute(
                update(CheckpointProgress).where(CheckpointProgress.id == row_id).values(seconds_from_start=seconds)
            )
    return first


def _completions(events: Iterable[NewEvent], lessons: dict[str, Lesson]) -> dict[tuple[str, str, str], NewEvent]:
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
