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
from typing import Any

import orjson
from sqlalchemy import case, delete, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from ..lessons import Lesson
from .engine import Database
from .models import CheckpointProgress, ErasedEvent, Event, ExerciseCheck

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

    def status_of(self, event_id: str) -> str:
        if event_id in self.created:
            return "created"
        return "erased" if event_id in self.erased else "duplicate"


def tombstone(platform_id: int, event_id: str) -> str:
    return hashlib.sha256(f"{platform_id}:{event_id}".encode()).hexdigest()


def _insert(session: Session, table):
    dialect = session.get_bind().dialect.name
    return (postgresql.insert if dialect == "postgresql" else sqlite.insert)(table)


def record_events(db: Database, platform_id: int, events: list[NewEvent],
                  lessons: dict[str, Lesson]) -> RecordResult:
    """Store new events, acknowledge identical replays, reject the whole batch on any conflict."""
    for attempt in range(1, MAX_ATTEMPTS + 1):
        try:
            with db.write() as session:
                return _record(session, platform_id, sorted(events, key=lambda e: e.event_id), lessons)
        except DBAPIError as exc:
            if getattr(exc.orig, "sqlstate", None) not in RETRYABLE_SQLSTATES or attempt == MAX_ATTEMPTS:
                raise
            time.sleep(0.01 * 2**attempt)
    raise AssertionError("unreachable")


def _record(session: Session, platform_id: int, events: list[NewEvent], lessons: dict[str, Lesson]) -> RecordResult:
    result = RecordResult()
    hashes = {e.event_id: e.content_hash for e in events}
    stones = {tombstone(platform_id, e.event_id): e.event_id for e in events}
    erased = set(session.scalars(select(ErasedEvent.event_hash).where(
        ErasedEvent.platform_id == platform_id, ErasedEvent.event_hash.in_(list(stones)))))
    result.erased = [stones[h] for h in erased]
    fresh = [e for e in events if e.event_id not in set(result.erased)]
    if fresh:
        now = dt.datetime.now(dt.UTC)
        rows = [{"platform_id": platform_id, "event_id": e.event_id, "learner": e.learner, "lesson": e.lesson,
                 "checkpoint": e.checkpoint, "event": e.event, "instance_id": e.instance_id, "data": e.data,
                 "occurred_at": e.occurred_at, "stored_at": now, "content_hash": hashes[e.event_id]}
                for e in fresh]
        stmt = (_insert(session, Event).values(rows)
                .on_conflict_do_nothing(index_elements=["platform_id", "event_id"])
                .returning(Event.event_id))
        inserted = set(session.scalars(stmt))
        others = [e.event_id for e in fresh if e.event_id not in inserted]
        if others:
            stored = dict(session.execute(select(Event.event_id, Event.content_hash).where(
                Event.platform_id == platform_id, Event.event_id.in_(others))).all())
            conflicts = sorted(i for i in others if stored.get(i) != hashes[i])
            if conflicts:
                raise EventConflict(conflicts)  # the `write()` block rolls everything back
        result.created = [e.event_id for e in fresh if e.event_id in inserted]
        result.replayed = others
        _complete_checkpoints(session, platform_id, [e for e in fresh if e.event_id in inserted], lessons, result)
    return result


def _complete_checkpoints(session: Session, platform_id: int, events: Iterable[NewEvent],
                          lessons: dict[str, Lesson], result: RecordResult) -> None:
    earliest: dict[tuple[str, str, str], NewEvent] = {}
    for e in events:
        lesson = lessons.get(e.lesson)
        checkpoint = lesson.completes(e.event, e.checkpoint, e.instance_id) if lesson else None
        if checkpoint is None:
            continue
        key = (e.learner, e.lesson, checkpoint.id)
        if key not in earliest or e.occurred_at < earliest[key].occurred_at:
            earliest[key] = e
    if not earliest:
        return
    rows = [{"platform_id": platform_id, "learner": k[0], "lesson": k[1], "checkpoint": k[2],
             "completed_at": e.occurred_at, "event_id": e.event_id} for k, e in earliest.items()]
    stmt = _insert(session, CheckpointProgress).values(rows)
    earlier = stmt.excluded.completed_at < CheckpointProgress.completed_at
    stmt = stmt.on_conflict_do_update(
        index_elements=["platform_id", "learner", "lesson", "checkpoint"],
        set_={
            "completed_at": case((earlier, stmt.excluded.completed_at), else_=CheckpointProgress.completed_at),
            "event_id": case((earlier, stmt.excluded.event_id), else_=CheckpointProgress.event_id),
        },
    )
    session.execute(stmt)
    result.completed = sorted(earliest)


def erase_learner(db: Database, platform_id: int, learner: str) -> dict[str, int] | None:
    """Delete everything about one learner of one platform; None when there was nothing."""
    with db.write() as session:
        event_ids = list(session.scalars(select(Event.event_id).where(
            Event.platform_id == platform_id, Event.learner == learner)))
        progress = session.execute(delete(CheckpointProgress).where(
            CheckpointProgress.platform_id == platform_id, CheckpointProgress.learner == learner)).rowcount
        checks = session.execute(delete(ExerciseCheck).where(
            ExerciseCheck.platform_id == platform_id, ExerciseCheck.learner == learner)).rowcount
        if not event_ids and not progress and not checks:
            return None
        session.execute(delete(Event).where(Event.platform_id == platform_id, Event.learner == learner))
        if event_ids:
            stones = [{"platform_id": platform_id, "event_hash": tombstone(platform_id, i)} for i in event_ids]
            session.execute(_insert(session, ErasedEvent).values(stones)
                            .on_conflict_do_nothing(index_elements=["platform_id", "event_hash"]))
        return {"events": len(event_ids), "checkpoints": progress, "exercise_checks": checks}
