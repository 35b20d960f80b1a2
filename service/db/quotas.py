"""Storage quotas (issue 40): how many events, and how many bytes of them, one learner, one browser
session and one platform may store per period. A request is checked against what its subjects
have used (one read) before anything is written; what it did store is counted in the same
transaction as the rows themselves (on PostgreSQL in the same statement), so the counts are exact
and a crash cannot lose one. Requests checked at the same moment can pass a quota together by at
most what they carry: one batch each.

Usage lives in `storage_usage`, one row per (subject, window): the subject names the learner
(`learner:<platform>:<id>`, deleted when the learner is erased), the session (a hash of its id,
never the id), the network a browser session without a platform's launch writes from (a hash of
its /24 or /48: sessions are free to start, an address is not) or the platform; windows are whole
periods since the epoch, so every worker agrees on where a day begins. A quota of an `alarms` kind
is counted and reported, not refused: the web platform's is shared by every anonymous learner, so
one who fills it must not refuse everyone else. `workbench db maintain` deletes windows that have ended."""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.engine import Connection

KINDS = ("learner", "session", "network", "platform")
MEASURES = ("events", "bytes")
ROW_BYTES = 256  # what a stored row costs besides its own data: ids, times, hashes, index entries


@dataclass(frozen=True)
class Quota:
    kind: str  # learner | session | network | platform
    measure: str  # events | bytes
    amount: int
    seconds: int  # the period

    @property
    def name(self) -> str:
        return f"{self.kind} {self.measure}"

    def window(self, now: float) -> int:
        """The start of the period `now` falls in (seconds since the epoch)."""
        return int(now // self.seconds) * self.seconds


@dataclass(frozen=True)
class Stored:
    """One row a request would store, and whom it counts against."""

    learner: str | None  # None: counted against the session and the platform only
    bytes: int


class QuotaExceeded(Exception):
    """A request would take a subject past a quota: `too_large` when it would even in an empty
    period (413), else when the period has room again (`retry_after` seconds, 429)."""

    def __init__(self, quota: Quota, used: int, asked: int, retry_after: int):
        self.quota, self.used, self.asked, self.retry_after = quota, used, asked, retry_after
        self.too_large = asked > quota.amount
        super().__init__(quota.name)


def configured(settings: object) -> tuple[Quota, ...]:
    """The quotas the settings turn on (`quota_<kind>_<measure>` = "amount/period")."""
    from limits import parse

    found = []
    for kind in KINDS:
        for measure in MEASURES:
            value = getattr(settings, f"quota_{kind}_{measure}")
            if value:
                item = parse(value)
                found.append(Quota(kind, measure, item.amount, item.get_expiry()))
    return tuple(found)


def session_subject(sid: str | None) -> str | None:
    """A browser session's subject: a hash of its id (the id itself is a credential)."""
    return f"session:{hashlib.sha256(sid.encode()).hexdigest()[:32]}" if sid else None


def network_subject(block: str) -> str:
    """A network's subject (`identity.block_of`): a hash, so no address is stored."""
    return f"network:{hashlib.sha256(block.encode()).hexdigest()[:32]}"


def learner_subject(platform_id: int, learner: str) -> str:
    return f"learner:{platform_id}:{learner}"


def demand(
    platform_id: int, rows: Iterable[Stored], session: str | None, network: str | None = None
) -> dict[tuple[str, str], tuple[int, int]]:
    """(kind, subject) -> (events, bytes) that `rows` would add."""
    totals: dict[tuple[str, str], list[int]] = {}
    for row in rows:
        subjects = [("platform", f"platform:{platform_id}")]
        if row.learner is not None:
            subjects.append(("learner", learner_subject(platform_id, row.learner)))
        if session is not None:
            subjects.append(("session", session))
        if network is not None:
            subjects.append(("network", network))
        for key in subjects:
            total = totals.setdefault(key, [0, 0])
            total[0] += 1
            total[1] += row.bytes
    return {key: (events, size) for key, (events, size) in totals.items()}


def usage_rows(
    quotas: tuple[Quota, ...], wanted: dict[tuple[str, str], tuple[int, int]], now: float
) -> list[dict[str, int | str]]:
    """The `storage_usage` increments for what was stored: one per (subject, window)."""
    rows: dict[tuple[str, int, int], list[int]] = {}
    for (kind, subject), (events, size) in wanted.items():
        for seconds in sorted({q.seconds for q in quotas if q.kind == kind}):
            row = rows.setdefault((subject, seconds, int(now // seconds) * seconds), [0, 0])
            row[0] += events
            row[1] += size
    return [
        {"subject": s, "window_seconds": w, "window_start": start, "events": e, "bytes": b}
        for (s, w, start), (e, b) in sorted(rows.items())
    ]


def merged(parts: Iterable[list[dict[str, int | str]]]) -> list[dict[str, int | str]]:
    """Several requests' or events' increments as one per (subject, window), in key order (the
    order rows are locked in)."""
    rows: dict[tuple, dict[str, int | str]] = {}
    for part in parts:
        for row in part:
            key = (row["subject"], row["window_seconds"], row["window_start"])
            if key in rows:
                rows[key] = {
                    **rows[key],
                    "events": int(rows[key]["events"]) + int(row["events"]),
                    "bytes": int(rows[key]["bytes"]) + int(row["bytes"]),
                }
            else:
                rows[key] = dict(row)
    return [rows[k] for k in sorted(rows)]


ADD_USAGE = """
    INSERT INTO storage_usage (subject, window_seconds, window_start, events, bytes)
    VALUES (:subject, :window_seconds, :window_start, :events, :bytes)
    ON CONFLICT (subject, window_seconds, window_start)
    DO UPDATE SET events = storage_usage.events + excluded.events, bytes = storage_usage.bytes + excluded.bytes
"""


def add_usage(conn: Connection | sqlite3.Connection, rows: list[dict[str, int | str]]) -> None:
    """Count stored rows, inside the transaction that stored them (SQLAlchemy or the driver's)."""
    if not rows:
        return
    if isinstance(conn, sqlite3.Connection):
        conn.executemany(ADD_USAGE, rows)
    else:
        conn.execute(text(ADD_USAGE), rows)


Key = tuple[str, int, int]  # (subject, window_seconds, window_start): one storage_usage row
Wanted = dict[tuple[str, str], tuple[int, int]]  # (kind, subject) -> (events, bytes) a request would add


def check(
    conn: Connection,
    quotas: tuple[Quota, ...],
    wanted: dict[tuple[str, str], tuple[int, int]],
    now: float,
    alarms: frozenset[str] = frozenset(),
) -> tuple[dict[Key, tuple[int, int]], list[QuotaExceeded]]:
    """Raise QuotaExceeded for the first quota `wanted` would pass (a request too large for any
    period first, then the one whose period ends last); else what each subject's window holds, and
    the quotas of the `alarms` kinds it passes (counted, never refused)."""
    relevant = [(q, subject, asked) for (kind, subject), asked in wanted.items() for q in quotas if q.kind == kind]
    if not relevant:
        return {}, []
    for q, _, (events, size) in relevant:
        asked = events if q.measure == "events" else size
        if asked > q.amount and q.kind not in alarms:
            raise QuotaExceeded(q, 0, asked, 0)
    keys = sorted({(subject, q.seconds, q.window(now)) for q, subject, _ in relevant})
    used = _read(conn, keys)
    passed = []
    for q, subject, (events, size) in relevant:
        had = used.get((subject, q.seconds, q.window(now)), (0, 0))
        have, asked = (had[0], events) if q.measure == "events" else (had[1], size)
        if have + asked > q.amount:
            passed.append(QuotaExceeded(q, have, asked, max(1, int(q.window(now) + q.seconds - now + 0.999))))
    refused = [e for e in passed if e.quota.kind not in alarms]
    if refused:
        raise max(refused, key=lambda e: e.retry_after)
    return {key: used.get(key, (0, 0)) for key in keys}, [e for e in passed if e.quota.kind in alarms]


READ_EVERY = 2.0  # seconds a process trusts what it last read of a subject


class Seen:
    """What this process last read of each subject's window, and what it let through since. A
    request that, by that count, leaves every quota it meets under half needs no read: the common
    case, a learner far from a quota, costs nothing. Near a quota (past half), or READ_EVERY after
    the last read, every request reads. So between two reads a process lets through at most half a
    quota: two processes cannot pass one together, more can by half a quota each."""

    def __init__(self) -> None:
        self._known: dict[Key, list[float]] = {}  # key -> [read_at, events, bytes, events since, bytes since]
        self._lock = threading.Lock()

    def clear(self, quotas: tuple[Quota, ...], wanted: Wanted, now: float) -> bool:
        """Whether `wanted` stays under half of every quota by what this process knows: no read needed."""
        with self._lock:
            for (kind, subject), (events, size) in wanted.items():
                for q in (q for q in quotas if q.kind == kind):
                    entry = self._known.get((subject, q.seconds, q.window(now)))
                    if entry is None or now - entry[0] > READ_EVERY:
                        return False
                    have = entry[1] + entry[3] + events if q.measure == "events" else entry[2] + entry[4] + size
                    if have > q.amount / 2:
                        return False
        return True

    def remember(self, read: dict[Key, tuple[int, int]], now: float) -> None:
        with self._lock:
            if len(self._known) > 100_000:  # windows end: forget them all rather than grow
                self._known.clear()
            for key, (events, size) in read.items():
                self._known[key] = [now, events, size, 0, 0]

    def let_through(
        self, quotas: tuple[Quota, ...], wanted: dict[tuple[str, str], tuple[int, int]], now: float
    ) -> None:
        """Count what was just let through (as if all new) until the next read."""
        with self._lock:
            for (kind, subject), (events, size) in wanted.items():
                for seconds in {q.seconds for q in quotas if q.kind == kind}:
                    entry = self._known.get((subject, seconds, int(now // seconds) * seconds))
                    if entry is not None:
                        entry[3] += events
                        entry[4] += size


def _read(conn: Connection, keys: list[tuple[str, int, int]]) -> dict[tuple[str, int, int], tuple[int, int]]:
    clauses = " OR ".join(
        f"(subject = :s{i} AND window_seconds = :w{i} AND window_start = :t{i})" for i in range(len(keys))
    )
    params: dict[str, int | str] = {}
    for i, (subject, seconds, start) in enumerate(keys):
        params.update({f"s{i}": subject, f"w{i}": seconds, f"t{i}": start})
    found = conn.execute(
        text(f"SELECT subject, window_seconds, window_start, events, bytes FROM storage_usage WHERE {clauses}"), params
    )
    return {(s, w, t): (e, b) for s, w, t, e, b in found}


def prune(conn: Connection, now: float) -> int:
    """Delete the windows that have ended; how many."""
    gone = conn.execute(text("DELETE FROM storage_usage WHERE window_start + window_seconds <= :now"), {"now": now})
    return int(gone.rowcount or 0)


def forget_learner(conn: Connection, platform_id: int, learner: str) -> None:
    """An erased learner leaves no usage row naming them."""
    conn.execute(text("DELETE FROM storage_usage WHERE subject = :s"), {"s": learner_subject(platform_id, learner)})


def fullest(conn: Connection, quotas: tuple[Quota, ...], now: float) -> dict[str, float]:
    """Each quota's most used subject this period, as a fraction of the quota (for metrics)."""
    found: dict[str, float] = {}
    for q in quotas:
        most = conn.execute(
            text(
                f"SELECT max({q.measure}) FROM storage_usage "
                "WHERE window_seconds = :w AND window_start = :t AND subject LIKE :kind"
            ),
            {"w": q.seconds, "t": q.window(now), "kind": f"{q.kind}:%"},
        ).scalar()
        found[q.name] = (most or 0) / q.amount
    return found
