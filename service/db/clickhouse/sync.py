"""`workbench analytics sync`: copy what the analytics read from the primary database to
ClickHouse, resumable and idempotent.

- Events by id, in batches, up to the highest id below which every event is committed (the
  refresh's rule, `committed_high`). With each batch go the derived rows (first events,
  progress) of the learners it touched, as they are now. The batch's last id is then recorded in
  `sync_marks`; a crash before that copies the batch again, and the tables replace rows by key,
  so each row is read once (FINAL).
- Exercise checks by id the same way; learners' languages by update time (a margin behind the
  last copy, since an update may commit late).
- Erasures: each learner queued in `analytics_erasures` is deleted from every table (hidden at
  once, gone at the next merge), after the batches so a batch read before the erasure cannot
  bring them back; then the queue row goes.

One sync runs at a time per primary database (`one_sync`): two passes that read the same events
under different bounds would insert them under different deduplication tokens, and the view's
counts would count them twice.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import logging
import os
import threading
import time
import zlib
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from sqlalchemy import delete, select, text

from ..analytics.item_rollups import sums
from ..analytics.rollup_refresh import catch_up, committed_high
from ..analytics.rollups import watermark
from ..engine import Database
from ..partitions import retention_cutoff
from ..tables import AnalyticsErasure, CheckpointProgress, Event, ExerciseCheck, LearnerLesson, LearnerLocale
from .connection import AnalyticsUnavailable, ClickHouse
from .schema import TABLES, counted, migrate

log = logging.getLogger(__name__)

BATCH = 20_000
LOOKUP = 500  # learners per IN list
CATCH_UP_AFTER = 5000  # events after the primary's rollups' watermark before they roll up first
LATE_COMMIT = dt.timedelta(minutes=10)  # a language change committed this late is still copied
RETENTION_EVERY = dt.timedelta(hours=1)  # between retention passes: each DELETE is a mutation
EVENT_COLUMNS = (
    "platform_id",
    "id",
    "event_id",
    "learner",
    "lesson",
    "checkpoint",
    "event",
    "instance_id",
    "item",
    "data",
    "occurred_at",
    "stored_at",
    "content_hash",
)


SYNC_LOCK = zlib.crc32(b"workbench analytics sync")  # PostgreSQL's advisory lock key
_in_memory = threading.Lock()  # SQLite in memory: one process's


class SyncRunning(RuntimeError):
    """Another sync holds this primary database's sync lock."""


@contextmanager
def one_sync(db: Database) -> Iterator[None]:
    """Hold the primary database's sync lock for one pass, or raise SyncRunning at once. On
    PostgreSQL a session advisory lock, on SQLite a lock on a file beside the database; either
    goes with the process that held it."""
    if not db.is_sqlite:
        with db.engine.connect() as conn:
            held = conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": SYNC_LOCK}).scalar()
            conn.commit()  # the lock is the session's: no transaction stays open while it is held
            if not held:
                raise SyncRunning("another analytics sync is running on this database")
            try:
                yield
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": SYNC_LOCK})
                conn.commit()
        return
    if db.sqlite_file is None:
        if not _in_memory.acquire(blocking=False):
            raise SyncRunning("another analytics sync is running on this database")
        try:
            yield
        finally:
            _in_memory.release()
        return
    handle = os.open(f"{db.sqlite_file}.analytics-sync.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SyncRunning("another analytics sync is running on this database") from None
        yield
    finally:
        os.close(handle)


def mark(ch: ClickHouse, source: str) -> int:
    found = ch.rows("SELECT mark FROM {db}.sync_marks FINAL WHERE source = {s:String}", s=source)
    return int(found[0][0]) if found else 0


def _set_mark(ch: ClickHouse, source: str, value: int) -> None:
    ch.insert("sync_marks", ("source", "mark", "at"), [(source, value, dt.datetime.now(dt.UTC))])


def sync(db: Database, ch: ClickHouse, batch: int = BATCH, keep_months: int = 0) -> Counter:
    """One pass: every event, check and language committed before the call, every erasure
    queued, and retention (`keep_months`, WORKBENCH_EVENTS_RETENTION_MONTHS); how many rows of
    each were copied (or learners erased, or events expired)."""
    started = dt.datetime.now(dt.UTC)
    copied: Counter = Counter()
    answered: set[tuple[int, str]] = set()  # (platform, lesson) with new answers
    high = committed_high(db, Event)
    low = mark(ch, "events")
    while low < high:
        low = _event_batch(db, ch, low, high, batch, copied, answered)
    high = committed_high(db, ExerciseCheck)
    low = mark(ch, "exercise_checks")
    while low < high:
        low = _check_batch(db, ch, low, high, batch, copied)
    _locales(db, ch, copied)
    erased = erase_queued(db, ch)
    copied["erased"] = len(erased)
    for platform_id in set(erased):
        answered |= answered_lessons(ch, platform_id)
    copied["item_sums"] += item_sums(db, ch, answered)
    copied["expired"] = expire(db, ch, keep_months, started)
    _set_mark(ch, "synced_at", int(started.timestamp() * 1_000_000))
    return copied


def expire(db: Database, ch: ClickHouse, keep_months: int, now: dt.datetime) -> int:
    """Retention as the primary applies it (service/db/partitions.py): events stored before the
    cutoff that the primary's rollups hold go from ClickHouse too, at most once an hour; the
    view's hourly counts keep them, as the rollups do. How many went."""
    due = mark(ch, "expired_at") + RETENTION_EVERY.total_seconds() * 1_000_000 <= now.timestamp() * 1_000_000
    if keep_months <= 0 or not due:
        return 0
    with db.read() as session:
        rolled = watermark(session.connection())
    where = "stored_at < {c:DateTime64(6, 'UTC')} AND id <= {w:UInt64}"
    params = {"c": retention_cutoff(keep_months, now), "w": rolled}
    found = int(ch.rows(f"SELECT count() FROM {{db}}.events FINAL WHERE {where}", **params)[0][0])
    if found:
        ch.command(f"DELETE FROM {{db}}.events WHERE {where}", **params)
    _set_mark(ch, "expired_at", int(now.timestamp() * 1_000_000))
    return found


def _event_batch(db: Database, ch: ClickHouse, low: int, high: int, batch: int, copied: Counter, answered: set) -> int:
    """One batch: its bounds recorded first (`events_pending`), so a batch begun and not finished
    is begun again with the same bounds and token, and ClickHouse skips what it already has."""
    columns = [getattr(Event, c) for c in EVENT_COLUMNS]
    pending = mark(ch, "events_pending")
    with db.read() as session:
        query = select(*columns).where(Event.id > low).order_by(Event.id)
        if pending > low:
            rows = session.execute(query.where(Event.id <= pending)).all()
            upto = pending
        else:
            rows = session.execute(query.where(Event.id <= high).limit(batch)).all()
            upto = rows[-1].id if len(rows) == batch else high
            _set_mark(ch, "events_pending", upto)
        who = {(r.platform_id, r.learner) for r in rows}
        lessons = _of(session, LearnerLesson, who, ("platform_id", "lesson", "learner", "first_event_at"))
        progress = _of(
            session,
            CheckpointProgress,
            who,
            ("platform_id", "lesson", "learner", "checkpoint", "completed_at", "seconds_from_start", "verification"),
        )
    copied["events"] += ch.insert("events", EVENT_COLUMNS, (_event_row(r) for r in rows), token=f"events:{low}:{upto}")
    ch.insert(
        "learner_lessons",
        ("platform_id", "lesson", "learner", "first_event_at", "version"),
        (tuple(r) + (upto,) for r in lessons),
    )
    ch.insert(
        "checkpoint_progress",
        (
            "platform_id",
            "lesson",
            "learner",
            "checkpoint",
            "completed_at",
            "seconds_from_start",
            "verification",
            "version",
        ),
        (tuple(r) + (upto,) for r in progress),
    )
    copied["progress"] += len(progress)
    answered |= {(r.platform_id, r.lesson) for r in rows if r.event == "answered"}
    _set_mark(ch, "events", upto)
    return upto


def _event_row(r) -> tuple:
    return (*r[:9], json.dumps(r.data, separators=(",", ":")), *r[10:])


def _of(session, model, who: Iterable[tuple[int, str]], names: tuple[str, ...]) -> list:
    """The rows of `model` of these (platform, learner) pairs."""
    by_platform: dict[int, list[str]] = defaultdict(list)
    for platform, learner in who:
        by_platform[platform].append(learner)
    found = []
    for platform, learners in by_platform.items():
        for i in range(0, len(learners), LOOKUP):
            chunk = learners[i : i + LOOKUP]
            found += session.execute(
                select(*(getattr(model, n) for n in names)).where(
                    model.platform_id == platform, model.learner.in_(chunk)
                )
            ).all()
    return found


def _check_batch(db: Database, ch: ClickHouse, low: int, high: int, batch: int, copied: Counter) -> int:
    names = ("platform_id", "id", "learner", "lesson", "diagnosis", "created_at")
    with db.read() as session:
        rows = session.execute(
            select(*(getattr(ExerciseCheck, n) for n in names))
            .where(ExerciseCheck.id > low, ExerciseCheck.id <= high)
            .order_by(ExerciseCheck.id)
            .limit(batch)
        ).all()
    upto = rows[-1].id if len(rows) == batch else high
    copied["exercise_checks"] += ch.insert("exercise_checks", names, rows)
    _set_mark(ch, "exercise_checks", upto)
    return upto


def _locales(db: Database, ch: ClickHouse, copied: Counter) -> None:
    since = dt.datetime.fromtimestamp(mark(ch, "learner_locales") / 1_000_000, dt.UTC) - LATE_COMMIT
    names = ("platform_id", "learner", "locale", "updated_at")
    with db.read() as session:
        rows = session.execute(
            select(*(getattr(LearnerLocale, n) for n in names)).where(LearnerLocale.updated_at > since)
        ).all()
    if rows:
        copied["learner_locales"] += ch.insert("learner_locales", names, rows)
        newest = max(r.updated_at for r in rows)
        _set_mark(ch, "learner_locales", int(newest.timestamp() * 1_000_000))


def forget(ch: ClickHouse, platform_id: int, learner: str, db: Database | None = None) -> None:
    """Delete one learner's rows from every table: hidden from reads at once. With the primary
    database (already erased), the platform's item sums too: a sum over the learners' answers holds
    no learner's name, but a rare number answer is a key of its own, which goes with them."""
    for table in TABLES:
        ch.command(
            f"DELETE FROM {{db}}.{table} WHERE platform_id = {{p:UInt32}} AND learner = {{l:String}}",
            p=platform_id,
            l=learner,
        )
    if db is not None:
        item_sums(db, ch, answered_lessons(ch, platform_id))


def answered_lessons(ch: ClickHouse, platform_id: int) -> set[tuple[int, str]]:
    """The platform's lessons whose item sums ClickHouse holds."""
    found = ch.rows(
        "SELECT DISTINCT toString(lesson) FROM {db}.item_sums WHERE platform_id = {p:UInt32}", p=platform_id
    )
    return {(platform_id, lesson) for (lesson,) in found}


def recount(ch: ClickHouse, platform_id: int) -> None:
    """A platform's `event_counts` counted again from its events (after an erasure: an aggregate
    state cannot take one learner out). Counted aside first, so readers miss them only while
    the new rows are copied in."""
    ch.command("CREATE TABLE IF NOT EXISTS {db}.event_counts_recount AS {db}.event_counts")
    ch.command("TRUNCATE TABLE {db}.event_counts_recount")
    ch.command(
        "INSERT INTO {db}.event_counts_recount "
        + counted("{db}.events FINAL", "WHERE platform_id = {p:UInt32}")
        + " SETTINGS insert_deduplicate = 0",
        p=platform_id,
    )
    ch.command("DELETE FROM {db}.event_counts WHERE platform_id = {p:UInt32}", p=platform_id)
    # Not deduplicated: the same counts as an earlier recount must still be written again.
    ch.command("INSERT INTO {db}.event_counts SELECT * FROM {db}.event_counts_recount SETTINGS insert_deduplicate = 0")


def item_sums(db: Database, ch: ClickHouse, lessons: set[tuple[int, str]]) -> int:
    """Copy the item statistics' sums of these (platform, lesson)s as the primary holds them now.
    They are sums over each learner's latest answers, which the primary's rollups keep as
    answers arrive and erasures leave (item_rollups.py); counting them again in ClickHouse at
    each read would take every learner's answers (seconds at ten million events). A key the
    primary no longer holds (its last learner erased, or changed their answer) is deleted."""
    if not lessons:
        return 0
    catch_up(db, CATCH_UP_AFTER)  # as an analytics read on the primary would
    version = time.time_ns() // 1000
    rows: list[tuple] = []
    gone: list[tuple[int, str, str]] = []
    with db.snapshot() as session:
        for platform_id, lesson in sorted(lessons):
            now = sums(session.connection(), platform_id, lesson)
            held = ch.rows(
                "SELECT DISTINCT toString(dimension), key FROM {db}.item_sums"
                " WHERE platform_id = {p:UInt32} AND lesson = {l:String}",
                p=platform_id,
                l=lesson,
            )
            rows += [(platform_id, lesson, d, k, *values, version) for (d, k), values in now.items()]
            gone += [(platform_id, lesson, k) for d, k in held if (d, k) not in now]
    names = ("platform_id", "lesson", "dimension", "key", "learners", "sx", "sy", "sxy", "syy", "version")
    copied = ch.insert("item_sums", names, rows)
    for platform_id, lesson, key in gone:
        ch.command(
            "DELETE FROM {db}.item_sums WHERE platform_id = {p:UInt32} AND lesson = {l:String} AND key = {k:String}",
            p=platform_id,
            l=lesson,
            k=key,
        )
    return copied


def erase_queued(db: Database, ch: ClickHouse) -> list[int]:
    """Apply every queued erasure, then drop it from the queue; each erased learner's platform."""
    with db.read() as session:
        queued = session.execute(
            select(AnalyticsErasure.id, AnalyticsErasure.platform_id, AnalyticsErasure.learner)
        ).all()
    for _, platform_id, learner in queued:
        forget(ch, platform_id, learner)
    for platform_id in sorted({q.platform_id for q in queued}):
        recount(ch, platform_id)
    if queued:
        with db.write() as session:
            session.execute(delete(AnalyticsErasure).where(AnalyticsErasure.id.in_([q.id for q in queued])))
    return [q.platform_id for q in queued]


def one_pass(db: Database, ch: ClickHouse, keep_months: int = 0) -> Counter:
    """Migrate when needed and sync, holding the sync lock (SyncRunning when another holds it)."""
    with one_sync(db):
        migrate(ch)
        return sync(db, ch, keep_months=keep_months)


def follow(db: Database, ch: ClickHouse, interval: float, passes: int | None = None, keep_months: int = 0) -> None:
    """Migrate when needed and sync, every `interval` seconds (`passes` times, or for ever); a
    store that cannot be reached is tried again at the next pass."""
    done = 0
    while passes is None or done < passes:
        try:
            copied = one_pass(db, ch, keep_months)
            if copied.total():
                log.info("analytics sync: %s", dict(copied))
        except (AnalyticsUnavailable, SyncRunning) as error:
            log.warning("analytics sync: %s; trying again in %.0f s", error, interval)
        done += 1
        if passes is None or done < passes:
            time.sleep(interval)
