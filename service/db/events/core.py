"""What an event is as the database records it: the event, the outcome of recording a batch,
its conflict, the payload rows both backends read (hashes, times in the column's own format, what
each event completes or advances under its lesson's rules), and which checkpoints new events
complete. No statements here: sqlite.py and postgresql.py record; __init__.py chooses."""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson
from sqlalchemy.dialects import postgresql, sqlite

from ...lessons import Checkpoint, Lesson
from ..quotas import ROW_BYTES

SCORE_KEYS = ("correct", "misconception")  # what the server adds to an answered event's data


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
    item: str | None = None  # answered events: the lesson's item answered

    def canonical(self) -> dict[str, Any]:
        """What the client sent, as hashed for idempotency: not the score the server adds to an
        answer (a replay after the answer key changed is still the same event), and no `item` key
        on events without one (their hash is as it was before items existed)."""
        said = described(self)
        if self.item is None:
            del said["item"]
        else:
            said["data"] = {k: v for k, v in self.data.items() if k not in SCORE_KEYS}
        return {
            "id": self.event_id,
            **said,
            "occurred_at": self.occurred_at.astimezone(dt.UTC).isoformat(timespec="microseconds"),
        }

    @property
    def content_hash(self) -> str:
        return hashlib.sha256(orjson.dumps(self.canonical(), option=orjson.OPT_SORT_KEYS)).hexdigest()


def stored_bytes(e: NewEvent) -> int:
    """What storing the event costs, for the storage quotas: its data and text as stored, and a
    row's fixed share (ids, times, hashes, index entries)."""
    texts = (e.learner, e.lesson, e.checkpoint or "", e.event, e.instance_id or "", e.item or "")
    return ROW_BYTES + len(orjson.dumps(e.data)) + sum(len(t.encode()) for t in texts)


def described(e: NewEvent | Any) -> dict[str, Any]:
    """What an event says, a new one or a stored row alike: who, where, what, and its data."""
    return {
        "learner": e.learner,
        "lesson": e.lesson,
        "checkpoint": e.checkpoint,
        "event": e.event,
        "instance_id": e.instance_id,
        "item": e.item,
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


def payload_rows(
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
                "occurred_at": sqlite_time(at) if sqlite else at.isoformat(),
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


def sqlite_time(at: dt.datetime) -> str:
    """How SQLAlchemy's DateTime stores a (naive UTC) time on SQLite."""
    return at.replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")


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
