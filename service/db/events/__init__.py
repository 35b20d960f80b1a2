"""Recording progress events exactly once: a batch is one transaction, conflicts are found inside
the insert transaction (never by reading first), the earliest completion wins, durations stay
current. core.py holds what an event is; sqlite.py and postgresql.py record on their backend
(PostgreSQL in one call of its stored function, migrations/stored.py); group_commit.py writes the events
of requests that arrive together in one transaction (`record_events`, what the API calls)."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import weakref
from dataclasses import dataclass

from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

from ...lessons import Lesson
from .. import quotas
from ..engine import Database
from . import postgresql, sqlite
from .core import (
    EventConflict,
    NewEvent,
    RecordResult,
    completions_among,
    described,
    dialect_insert,
    payload_rows,
    stored_bytes,
    tombstone,
    verification,
)
from .group_commit import GroupCommit

__all__ = [
    "Counted",
    "EventConflict",
    "NewEvent",
    "RecordResult",
    "completions_among",
    "described",
    "dialect_insert",
    "record_events",
    "record_events_in",
    "stored_bytes",
    "tombstone",
    "verification",
    "write_events",
]

RETRYABLE_SQLSTATES = {"40001", "40P01"}  # serialization failure, deadlock detected
MAX_ATTEMPTS = 4


@dataclass(frozen=True)
class Counted:
    """What stored events count against (service/db/quotas.py): these quotas, this session."""

    quotas: tuple[quotas.Quota, ...]
    session: str | None = None  # quotas.session_subject of the browser session that sent them
    network: str | None = None  # quotas.network_subject of an anonymous browser session's network
    alarms: frozenset[str] = frozenset()  # quota kinds counted and reported, not refused


def write_events(
    db: Database,
    platform_id: int,
    events: list[NewEvent],
    lessons: dict[str, Lesson],
    counted: dict[str, Counted] | None = None,
) -> RecordResult:
    """Store new events, acknowledge identical replays, reject them all on any conflict: one
    transaction (deadlocks and serialization failures are retried). The new ones are counted
    against the quotas `counted` names per event id, in the same transaction. Requests go
    through `record_events`, which groups concurrent ones."""
    events = sorted(events, key=lambda e: e.event_id)  # one lock order for every writer
    # The payload is made before the transaction: SQLite's writer lock (and a PostgreSQL
    # connection) is then held for the statements alone, while another worker prepares.
    rows = payload_rows(platform_id, events, lessons, sqlite=db.is_sqlite)
    now = time.time()
    counted = counted or {}
    usage = {e.event_id: _usage(platform_id, e, counted[e.event_id], now) for e in events if e.event_id in counted}
    for attempt in range(1, MAX_ATTEMPTS + 1):
        try:
            if db.is_sqlite:
                with db.sqlite_transaction() as raw:
                    result = sqlite.record(raw, platform_id, events, lessons, rows)
                    quotas.add_usage(raw, quotas.merged([usage[i] for i in result.created if i in usage]))
                    return result
            with db.write_statement() as conn:
                return postgresql.record(conn, platform_id, events, lessons, rows, usage)
        except DBAPIError as exc:
            if getattr(exc.orig, "sqlstate", None) not in RETRYABLE_SQLSTATES or attempt == MAX_ATTEMPTS:
                raise
            time.sleep(0.01 * 2**attempt)
    raise AssertionError("unreachable")


def _usage(platform_id: int, e: NewEvent, counted: Counted, now: float) -> list[dict[str, int | str]]:
    """The `storage_usage` increments one event makes if it is new."""
    wanted = quotas.demand(platform_id, [quotas.Stored(e.learner, stored_bytes(e))], counted.session, counted.network)
    return quotas.usage_rows(counted.quotas, wanted, now)


def record_events_in(
    conn: Connection, platform_id: int, events: list[NewEvent], lessons: dict[str, Lesson]
) -> RecordResult:
    """`record_events` inside a transaction the caller holds (one transaction per user action)."""
    events = sorted(events, key=lambda e: e.event_id)
    on_postgresql = conn.dialect.name == "postgresql"
    rows = payload_rows(platform_id, events, lessons, sqlite=not on_postgresql)
    if on_postgresql:
        return postgresql.record(conn, platform_id, events, lessons, rows)
    raw = conn.connection.driver_connection
    assert isinstance(raw, sqlite3.Connection)
    return sqlite.record(raw, platform_id, events, lessons, rows)


def record_events(
    db: Database,
    platform_id: int,
    events: list[NewEvent],
    lessons: dict[str, Lesson],
    counted: Counted | None = None,
) -> RecordResult:
    """Store new events, acknowledge identical replays, reject the whole batch on any conflict;
    the new ones count against `counted`'s quotas (checked before: `quotas.check`).

    Requests arriving while another write is under way are written together with it, next
    (service/db/events/group_commit.py); each stays atomic and gets its own answer."""
    return _group_commit(db).submit(_Request(platform_id, events, lessons, counted))


@dataclass(frozen=True, eq=False)
class _Request:
    platform_id: int
    events: list[NewEvent]
    lessons: dict[str, Lesson]
    counted: Counted | None = None


GROUP_MAX_EVENTS = 5000
_GROUPS: weakref.WeakKeyDictionary[Database, tuple[int, GroupCommit[_Request, RecordResult]]] = (
    weakref.WeakKeyDictionary()
)
_GROUPS_LOCK = threading.Lock()


def _group_commit(db: Database) -> GroupCommit[_Request, RecordResult]:
    """This process's group commit for `db` (a forked child makes its own)."""
    with _GROUPS_LOCK:
        pid, group = _GROUPS.get(db, (None, None))
        if group is None or pid != os.getpid():
            group = GroupCommit(lambda requests: _write_requests(db, requests), _fits)
            _GROUPS[db] = (os.getpid(), group)
        return group


def _fits(group: list[_Request], request: _Request) -> bool:
    """One platform per write, no event id twice, a bounded size."""
    if request.platform_id != group[0].platform_id:
        return False
    ids = {e.event_id for r in group for e in r.events}
    return len(ids) + len(request.events) <= GROUP_MAX_EVENTS and not any(e.event_id in ids for e in request.events)


def _write_requests(db: Database, requests: list[_Request]) -> list[RecordResult]:
    """Several requests' events in one transaction; each request's part of the answer."""
    first = requests[0]
    counted = {e.event_id: r.counted for r in requests if r.counted is not None for e in r.events}
    together = write_events(db, first.platform_id, [e for r in requests for e in r.events], first.lessons, counted)
    if len(requests) == 1:
        return [together]
    created, replayed, erased = set(together.created), set(together.replayed), set(together.erased)
    results = []
    for r in requests:
        ids = sorted(e.event_id for e in r.events)
        results.append(
            RecordResult(
                created=[i for i in ids if i in created],
                replayed=[i for i in ids if i in replayed],
                erased=[i for i in ids if i in erased],
                completed=_completed_by(r, created, together.completed),
            )
        )
    return results


def _completed_by(
    request: _Request, created: set[str], completed: list[tuple[str, str, str]]
) -> list[tuple[str, str, str]]:
    """The group's completions that this request's new events made: by completing a checkpoint,
    or by reporting one of its manipulations."""
    own = set()
    for e in request.events:
        lesson = request.lessons.get(e.lesson)
        if e.event_id not in created or lesson is None:
            continue
        checkpoint = lesson.completes(e.event, e.checkpoint, e.instance_id)
        advanced = lesson.advances(e.event, e.checkpoint, e.instance_id, e.data)
        for cp in (checkpoint, advanced[0] if advanced else None):
            if cp is not None:
                own.add((e.learner, e.lesson, cp.id))
    return sorted(own & set(completed))
