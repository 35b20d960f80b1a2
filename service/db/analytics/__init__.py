"""The analytics queries, in one place; each returns plain rows. Date bucketing is wrapped per
dialect (SQLite has no date_trunc); durations are stored in seconds when progress is written."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ..tables import CheckpointProgress, Event, ExerciseCheck, LearnerLesson, LearnerLocale
from . import mistake_rollups, rollups

BUCKETS = rollups.GRAINS


# The dates every analytics store holds, [EARLIEST, LATEST): ClickHouse's DateTime64 runs from 1900
# to 2299; the SQL stores' buckets need room past the last day (a week's start, the next bucket's).
EARLIEST = dt.datetime(1900, 1, 1, tzinfo=dt.UTC)
LATEST = dt.datetime(2300, 1, 1, tzinfo=dt.UTC)


@dataclass(frozen=True)
class Window:
    """Dates [start, end) (None: no bound), within what every store can hold (EARLIEST, LATEST).
    The funnel and durations count the learners who started the lesson (their first event in it)
    within them; parameters and mistakes count what happened within them."""

    start: dt.datetime | None = None
    end: dt.datetime | None = None

    def __bool__(self) -> bool:
        return self.start is not None or self.end is not None

    def started_within(self, query, progress) -> Any:
        """`query` over progress rows (a table or alias), kept to learners who started within."""
        if not self:
            return query
        visits = LearnerLesson.__table__
        query = query.join(
            visits,
            (visits.c.platform_id == progress.c.platform_id)
            & (visits.c.lesson == progress.c.lesson)
            & (visits.c.learner == progress.c.learner),
        )
        return _within(query, visits.c.first_event_at, self.start, self.end)


def _within(query, column, start: dt.datetime | None, end: dt.datetime | None):
    if start is not None:
        query = query.where(column >= start)
    if end is not None:
        query = query.where(column < end)
    return query


def timeseries(
    conn: Session,
    platform_id: int,
    bucket: str,
    group_by: str,
    window: Window,
    lesson: str | None,
) -> list[tuple[str, str | None, int, int]]:
    """(bucket start, key, events, learners) in bucket order. Whole buckets come from the
    rollups plus the events after their watermark; a bucket the window cuts is counted from
    the raw events within it."""
    v = rollups.variant(bucket, group_by, per_lesson=lesson is not None)
    db = conn.connection()
    return timeseries_from(
        bucket,
        window,
        lambda start, end: rollups.raw_counts(db, v, platform_id, lesson, start, end),
        lambda labels, inner: rollups.counts(db, v, platform_id, lesson, labels, inner),
    )


def timeseries_from(bucket: str, window: Window, raw, whole) -> list[tuple[str, str | None, int, int]]:
    """The time series, whichever store counts: `whole(labels, bounds)` the whole buckets within
    the window (bucket labels [first, end), end None for no end; the same bounds as datetimes),
    `raw(start, end)` the events of a bucket the window cuts."""
    inner = (
        rollups.bucket_ceil(window.start, bucket) if window.start is not None else None,
        rollups.bucket_floor(window.end, bucket) if window.end is not None else None,
    )
    if inner[0] is not None and inner[1] is not None and inner[0] >= inner[1]:
        return _sorted(raw(window.start, window.end))
    rows = []
    if window.start is not None and inner[0] != window.start:
        rows += raw(window.start, inner[0])
    labels = (
        inner[0].strftime(rollups.LABEL) if inner[0] else "",
        inner[1].strftime(rollups.LABEL) if inner[1] else None,
    )
    rows += whole(labels, inner)
    if window.end is not None and inner[1] != window.end:
        rows += raw(inner[1], window.end)
    return _sorted(rows)


def _sorted(rows: list) -> list[tuple[str, str | None, int, int]]:
    return sorted((tuple(r) for r in rows), key=lambda r: (r[0], r[1] or ""))


def _totals(conn: Session, dimension: str, platform_id: int, lesson: str, window: Window) -> list:
    """(key, events, learners) of a whole-period dimension: from the rollups when the window is
    open-ended, else counted from the events within it."""
    v, db = rollups.variant("all", dimension), conn.connection()
    if window:
        rows = rollups.raw_counts(db, v, platform_id, lesson, window.start, window.end)
    else:
        rows = rollups.counts(db, v, platform_id, lesson, ("", None), (None, None))
    return [(key, events, learners) for _, key, events, learners in rows]


def parameters(conn: Session, platform_id: int, lesson: str, window: Window = Window()) -> list[tuple[str, int, int]]:
    """(parameter, changes, learners), changes made within `window` (all by default); a
    parameter that is not a string of at most 128 characters is None."""
    return parameters_from(_totals(conn, "parameter", platform_id, lesson, window))


def manipulations(
    conn: Session, platform_id: int, lesson: str, window: Window = Window()
) -> dict[str, tuple[int, int]]:
    """manipulation -> (reports, distinct learners), reports made within `window` (all by default)."""
    return manipulations_from(_totals(conn, "manipulation", platform_id, lesson, window))


def token_cells(
    conn: Session, platform_id: int, lesson: str, window: Window = Window()
) -> list[tuple[int, int, int, int]]:
    """(token, dimension, edits, learners) for every token cell learners edited (within the
    dates); edits whose token or dimension is not a whole number are not counted."""
    return cells_from(_totals(conn, "cell", platform_id, lesson, window))


# What a whole-period dimension's (key, events, learners) rows say, whichever store counted them.


def parameters_from(rows: list) -> list[tuple[str, int, int]]:
    return sorted(rows, key=lambda r: (-r[1], r[0] or ""))


def manipulations_from(rows: list) -> dict[str, tuple[int, int]]:
    return {key: (n, learners) for key, n, learners in rows if key}


def cells_from(rows: list) -> list[tuple[int, int, int, int]]:
    cells = []
    for key, events, learners in rows:
        token, dimension = (key or "").split(",")
        cells.append((int(token), int(dimension), events, learners))
    return sorted(cells)


def mistakes(conn: Session, platform_id: int, lesson: str, window: Window = Window()) -> dict[str, tuple[int, int]]:
    """mistake id -> (checks showing it, distinct learners), checks made within the dates; checks
    without a learner count as checks only."""
    if not window:
        return mistake_rollups.totals(conn.connection(), platform_id, lesson)
    query = select(ExerciseCheck.diagnosis, ExerciseCheck.learner).where(
        ExerciseCheck.platform_id == platform_id,
        ExerciseCheck.lesson == lesson,
        ExerciseCheck.diagnosis.is_not(None),
    )
    rows = conn.execute(_within(query, ExerciseCheck.created_at, window.start, window.end))
    checks: dict[str, int] = defaultdict(int)
    learners: dict[str, set] = defaultdict(set)
    for diagnosis, learner in rows:
        for mistake in (diagnosis or "").split(","):
            checks[mistake] += 1
            if learner is not None:
                learners[mistake].add(learner)
    return {m: (checks[m], len(learners[m])) for m in checks}


def has_learners(conn: Session, platform_id: int, lesson: str, at_least: int) -> bool:
    """Whether at least `at_least` learners started the lesson (reads no more rows than that)."""
    first = (
        select(LearnerLesson.id)
        .where(LearnerLesson.platform_id == platform_id, LearnerLesson.lesson == lesson)
        .limit(at_least)
        .subquery()
    )
    return conn.execute(select(func.count()).select_from(first)).scalar_one() >= at_least


def learners_page(
    conn: Session, platform_id: int, lesson: str, after: str, limit: int, locale: str | None = None
) -> list[dict[str, Any]]:
    """A page of the lesson's learners after `after` (by id), each with the language they last
    read in; with `locale`, only those who read in it."""
    language = (LearnerLocale.platform_id == LearnerLesson.platform_id) & (
        LearnerLocale.learner == LearnerLesson.learner
    )
    query = (
        select(LearnerLesson.learner, LearnerLesson.first_event_at, LearnerLocale.locale)
        .outerjoin(LearnerLocale, language)
        .where(LearnerLesson.platform_id == platform_id, LearnerLesson.lesson == lesson, LearnerLesson.learner > after)
    )
    if locale is not None:
        query = query.where(LearnerLocale.locale == locale)
    visits = conn.execute(query.order_by(LearnerLesson.learner).limit(limit)).all()
    if not visits:
        return []
    done: dict[str, dict[str, Any]] = defaultdict(dict)
    for learner, checkpoint, at in conn.execute(
        select(CheckpointProgress.learner, CheckpointProgress.checkpoint, CheckpointProgress.completed_at).where(
            CheckpointProgress.platform_id == platform_id,
            CheckpointProgress.lesson == lesson,
            CheckpointProgress.learner.in_([v[0] for v in visits]),
        )
    ):
        done[learner][checkpoint] = at
    return [
        {"learner": learner, "locale": language, "started_at": first, "completed": done[learner]}
        for learner, first, language in visits
    ]


def export_page(
    conn: Session, platform_id: int, after: tuple[dt.datetime, int] | None, through: dt.datetime, limit: int
) -> list[Any]:
    """Events in (stored_at, id) order after the cursor, up to `through`: rows, not ORM objects."""
    query = select(Event.__table__).where(Event.platform_id == platform_id, Event.stored_at <= through)
    if after is not None:
        stored, row = after
        query = query.where((Event.stored_at > stored) | ((Event.stored_at == stored) & (Event.id > row)))
    return list(conn.execute(query.order_by(Event.stored_at, Event.id).limit(limit)))
