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
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
from collections import Counter, defaultdict
from collections.abc import Iterable

from sqlalchemy import delete, select

from ..analytics.rollup_refresh import committed_high
from ..engine import Database
from ..tables import AnalyticsErasure, CheckpointProgress, Event, ExerciseCheck, LearnerLesson, LearnerLocale
from .connection import AnalyticsUnavailable, ClickHouse
from .schema import TABLES, migrate

log = logging.getLogger(__name__)

BATCH = 20_000
LOOKUP = 500  # learners per IN list
LATE_COMMIT = dt.timedelta(minutes=10)  # a language change committed this late is still copied
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


def mark(ch: ClickHouse, source: str) -> int:
    found = ch.rows("SELECT mark FROM {db}.sync_marks FINAL WHERE source = {s:String}", s=source)
    return int(found[0][0]) if found else 0


def _set_mark(ch: ClickHouse, source: str, value: int) -> None:
    ch.insert("sync_marks", ("source", "mark", "at"), [(source, value, dt.datetime.now(dt.UTC))])


def sync(db: Database, ch: ClickHouse, batch: int = BATCH) -> Counter:
    """One pass: every event, check and language committed before the call, and every erasure
    queued; how many rows of each were copied (or learners erased)."""
    started = dt.datetime.now(dt.UTC)
    copied: Counter = Counter()
    high = committed_high(db, Event)
    low = mark(ch, "events")
    while low < high:
        low = _event_batch(db, ch, low, high, batch, copied)
    high = committed_high(db, ExerciseCheck)
    low = mark(ch, "exercise_checks")
    while low < high:
        low = _check_batch(db, ch, low, high, batch, copied)
    _locales(db, ch, copied)
    copied["erased"] = erase_queued(db, ch)
    _set_mark(ch, "synced_at", int(started.timestamp() * 1_000_000))
    return copied


def _event_batch(db: Database, ch: ClickHouse, low: int, high: int, batch: int, copied: Counter) -> int:
    columns = [getattr(Event, c) for c in EVENT_COLUMNS]
    with db.read() as session:
        rows = session.execute(
            select(*columns).where(Event.id > low, Event.id <= high).order_by(Event.id).limit(batch)
        ).all()
        upto = rows[-1].id if len(rows) == batch else high
        who = {(r.platform_id, r.learner) for r in rows}
        lessons = _of(session, LearnerLesson, who, ("platform_id", "lesson", "learner", "first_event_at"))
        progress = _of(
            session,
            CheckpointProgress,
            who,
            ("platform_id", "lesson", "learner", "checkpoint", "completed_at", "seconds_from_start", "verification"),
        )
    copied["events"] += ch.insert("events", EVENT_COLUMNS, (_event_row(r) for r in rows))
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


def forget(ch: ClickHouse, platform_id: int, learner: str) -> None:
    """Delete one learner's rows from every table: hidden from reads at once."""
    for table in TABLES:
        ch.command(
            f"DELETE FROM {{db}}.{table} WHERE platform_id = {{p:UInt32}} AND learner = {{l:String}}",
            p=platform_id,
            l=learner,
        )


def erase_queued(db: Database, ch: ClickHouse) -> int:
    """Apply every queued erasure, then drop it from the queue; how many learners."""
    with db.read() as session:
        queued = session.execute(
            select(AnalyticsErasure.id, AnalyticsErasure.platform_id, AnalyticsErasure.learner)
        ).all()
    for _, platform_id, learner in queued:
        forget(ch, platform_id, learner)
    if queued:
        with db.write() as session:
            session.execute(delete(AnalyticsErasure).where(AnalyticsErasure.id.in_([q.id for q in queued])))
    return len(queued)


def follow(db: Database, ch: ClickHouse, interval: float, passes: int | None = None) -> None:
    """Migrate when needed and sync, every `interval` seconds (`passes` times, or for ever); a
    store that cannot be reached is tried again at the next pass."""
    done = 0
    while passes is None or done < passes:
        try:
            migrate(ch)
            copied = sync(db, ch)
            if copied.total():
                log.info("analytics sync: %s", dict(copied))
        except AnalyticsUnavailable as error:
            log.warning("analytics sync: %s; trying again in %.0f s", error, interval)
        done += 1
        if passes is None or done < passes:
            time.sleep(interval)
