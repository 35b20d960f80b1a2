"""The funnel and time to complete: whole start days from the learner rollups (plus the learners
with events after the watermark), a day the window cuts from the progress tables."""

from __future__ import annotations

from collections import Counter
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ..tables import CheckpointProgress, LearnerLesson
from . import Window, _within, learner_rollups, rollups
from .duration_quantiles import duration_quantiles, linear

ALL_TIME = Window()


def funnel(
    conn: Session, platform_id: int, lesson: str, checkpoint_ids: list[str], window: Window = ALL_TIME
) -> dict[str, Any]:
    """Learners who started, completed each checkpoint, and went on from the previous one; of the
    learners who started within `window` (all of them by default). Call inside one snapshot."""
    parts = []
    days = _whole_days(window)
    if days is None:
        return _raw_funnel(conn, platform_id, lesson, checkpoint_ids, window)
    if window.start is not None and days[0] != window.start:
        parts.append(_raw_funnel(conn, platform_id, lesson, checkpoint_ids, Window(window.start, days[0])))
    labels = (days[0].strftime(rollups.LABEL) if days[0] else "", days[1].strftime(rollups.LABEL) if days[1] else None)
    states = learner_rollups.state_counts(conn.connection(), platform_id, lesson, labels)
    parts.append(_from_states(states, checkpoint_ids))
    if window.end is not None and days[1] != window.end:
        parts.append(_raw_funnel(conn, platform_id, lesson, checkpoint_ids, Window(days[1], window.end)))
    return _sum(parts)


def _whole_days(window: Window):
    """The whole UTC days within the window (None at an open end), or None when it holds none."""
    start = rollups.bucket_ceil(window.start, "day") if window.start is not None else None
    end = rollups.bucket_floor(window.end, "day") if window.end is not None else None
    if start is not None and end is not None and start >= end:
        return None
    return start, end


def _from_states(states: Counter, checkpoint_ids: list[str]) -> dict[str, Any]:
    completed: Counter = Counter()
    went_on: Counter = Counter()
    verification: Counter = Counter()
    for state, n in states.items():
        done = learner_rollups.Standing("", state, "").checkpoints()
        for checkpoint, how in done.items():
            completed[checkpoint] += n
            if how:
                verification[(checkpoint, how)] += n
        for previous, current in zip(checkpoint_ids, checkpoint_ids[1:], strict=False):
            if previous in done and current in done:
                went_on[current] += n
    return {
        "started": sum(states.values()),
        "completed": {c: completed[c] for c in checkpoint_ids},
        "after_previous": {c: went_on[c] for c in checkpoint_ids[1:]},
        "verification": dict(verification),
    }


def _sum(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Funnels of disjoint sets of learners, added up."""
    return {
        "started": sum(p["started"] for p in parts),
        "completed": {c: sum(p["completed"][c] for p in parts) for c in parts[0]["completed"]},
        "after_previous": {c: sum(p["after_previous"][c] for p in parts) for c in parts[0]["after_previous"]},
        "verification": dict(sum((Counter(p["verification"]) for p in parts), Counter())),
    }


def _raw_funnel(
    conn: Session, platform_id: int, lesson: str, checkpoint_ids: list[str], window: Window
) -> dict[str, Any]:
    """The funnel counted from the progress tables, for the learners who started within `window`."""
    visits, progress = LearnerLesson.__table__, CheckpointProgress.__table__
    started = conn.execute(
        _within(
            select(func.count())
            .select_from(visits)
            .where(visits.c.platform_id == platform_id, visits.c.lesson == lesson),
            visits.c.first_event_at,
            window.start,
            window.end,
        )
    ).scalar_one()
    counts = dict(
        conn.execute(
            window.started_within(select(progress.c.checkpoint, func.count()).select_from(progress), progress)
            .where(progress.c.platform_id == platform_id, progress.c.lesson == lesson)
            .group_by(progress.c.checkpoint)
        ).all()
    )
    return {
        "started": started,
        "completed": {c: counts.get(c, 0) for c in checkpoint_ids},
        "after_previous": _went_on(conn, platform_id, lesson, checkpoint_ids, window),
        "verification": _verification(conn, platform_id, lesson, window),
    }


def _went_on(conn: Session, platform_id: int, lesson: str, checkpoint_ids: list[str], window: Window) -> dict[str, int]:
    """checkpoint -> learners who completed it and the one before it."""
    progress = CheckpointProgress.__table__
    both: dict[str, int] = {}
    a, b = progress.alias("a"), progress.alias("b")
    for previous, current in zip(checkpoint_ids, checkpoint_ids[1:], strict=False):
        pairs = select(func.count()).select_from(
            a.join(b, (a.c.learner == b.c.learner) & (a.c.platform_id == b.c.platform_id) & (a.c.lesson == b.c.lesson))
        )
        both[current] = conn.execute(
            window.started_within(pairs, a).where(
                a.c.platform_id == platform_id,
                a.c.lesson == lesson,
                a.c.checkpoint == previous,
                b.c.checkpoint == current,
            )
        ).scalar_one()
    return both


def _verification(conn: Session, platform_id: int, lesson: str, window: Window) -> dict[tuple[str, str], int]:
    """(checkpoint, "verified" | "reported") -> learners."""
    progress = CheckpointProgress.__table__
    return {
        (checkpoint, how): count
        for checkpoint, how, count in conn.execute(
            window.started_within(
                select(progress.c.checkpoint, progress.c.verification, func.count()).select_from(progress), progress
            )
            .where(
                progress.c.platform_id == platform_id,
                progress.c.lesson == lesson,
                progress.c.verification.is_not(None),
            )
            .group_by(progress.c.checkpoint, progress.c.verification)
        )
    }


def durations_of(
    conn: Session,
    platform_id: int,
    lesson: str,
    checkpoints: tuple[str, ...],
    quantiles: tuple[float, ...],
    window: Window = ALL_TIME,
) -> dict[str, tuple[int, list[float]]]:
    """checkpoint -> (learners, the quantiles of whole seconds from first event to completion),
    over the learners who started within `window` (all of them by default): from the duration
    rollups, one query for every checkpoint, or with a window from the progress table."""
    if window:
        return {c: _durations_within(conn, platform_id, lesson, c, quantiles, window) for c in checkpoints}
    found = duration_quantiles(conn.connection(), platform_id, lesson, quantiles)
    return {c: found.get(c, (0, [0.0 for _ in quantiles])) for c in checkpoints}


def durations(
    conn: Session,
    platform_id: int,
    lesson: str,
    checkpoint: str,
    quantiles: tuple[float, ...],
    window: Window = ALL_TIME,
) -> tuple[int, list[float]]:
    """`durations_of` one checkpoint."""
    return durations_of(conn, platform_id, lesson, (checkpoint,), quantiles, window)[checkpoint]


def _durations_within(
    conn: Session, platform_id: int, lesson: str, checkpoint: str, quantiles: tuple[float, ...], window: Window
) -> tuple[int, list[float]]:
    """One checkpoint's durations over the learners who started within `window`, read from the
    durations index: a count, then the two values around each quantile's position (numpy's
    "linear" method), so no row is fetched that is not needed."""
    progress = CheckpointProgress.__table__
    base = (
        progress.c.platform_id == platform_id,
        progress.c.lesson == lesson,
        progress.c.checkpoint == checkpoint,
        progress.c.seconds_from_start.is_not(None),
    )
    n = conn.execute(
        window.started_within(select(func.count()).select_from(progress), progress).where(*base)
    ).scalar_one()
    values = []
    for q in quantiles:
        if n == 0:
            values.append(0.0)
            continue
        position = q * (n - 1)
        low = int(position)
        pair = [
            float(int(v or 0.0))  # whole seconds; never null here: the query keeps rows with stored seconds
            for v in conn.execute(
                window.started_within(select(progress.c.seconds_from_start).select_from(progress), progress)
                .where(*base)
                .order_by(progress.c.seconds_from_start)
                .offset(low)
                .limit(2)
            ).scalars()
        ]
        values.append(linear(q, n, pair[0], pair[1] if len(pair) > 1 else pair[0]))
    return n, values
