"""Mistake counts kept with each exercise check: checks are few next to events, so the check's
own transaction updates them (no watermark). A learner counts once per mistake: the first
time their row goes into `mistake_learners` (an insert that does nothing the second time, so
two checks at once cannot both count them). Checks without a learner count as checks only."""

from __future__ import annotations

from collections import Counter

from sqlalchemy import delete, select, update
from sqlalchemy.engine import Connection

from ..events import dialect_insert
from ..tables import ExerciseCheck, MistakeLearner, MistakeRollup, cast_table
from .rollups import in_batches

TOTALS = cast_table(MistakeRollup)
SEEN = cast_table(MistakeLearner)


def count_check(conn: Connection, platform_id: int, lesson: str, learner: str | None, mistakes: list[str]) -> None:
    """In the check's transaction: one more check for each mistake it showed."""
    dialect = conn.dialect.name
    for mistake in mistakes:
        first = 0
        if learner is not None:
            row = dict(platform_id=platform_id, lesson=lesson, mistake=mistake, learner=learner)
            inserted = conn.execute(
                dialect_insert(dialect, SEEN).values(**row).on_conflict_do_nothing().returning(SEEN.c.learner)
            ).first()
            first = 1 if inserted else 0
        statement = dialect_insert(dialect, TOTALS).values(
            platform_id=platform_id, lesson=lesson, mistake=mistake, checks=1, learners=first
        )
        conn.execute(
            statement.on_conflict_do_update(
                index_elements=["platform_id", "lesson", "mistake"],
                set_={"checks": TOTALS.c.checks + 1, "learners": TOTALS.c.learners + first},
            )
        )


def forget(conn: Connection, platform_id: int, learner: str) -> None:
    """In the erasure's transaction, before their checks go: take the learner's checks out."""
    checks: Counter = Counter()
    for lesson, diagnosis in conn.execute(
        select(ExerciseCheck.lesson, ExerciseCheck.diagnosis).where(
            ExerciseCheck.platform_id == platform_id,
            ExerciseCheck.learner == learner,
            ExerciseCheck.diagnosis.is_not(None),
        )
    ):
        checks.update((lesson, m) for m in (diagnosis or "").split(","))
    seen = {
        (lesson, m)
        for lesson, m in conn.execute(
            select(SEEN.c.lesson, SEEN.c.mistake).where(SEEN.c.platform_id == platform_id, SEEN.c.learner == learner)
        )
    }
    for lesson, mistake in set(checks) | seen:
        conn.execute(
            update(TOTALS)
            .where(TOTALS.c.platform_id == platform_id, TOTALS.c.lesson == lesson, TOTALS.c.mistake == mistake)
            .values(
                checks=TOTALS.c.checks - checks[(lesson, mistake)],
                learners=TOTALS.c.learners - (1 if (lesson, mistake) in seen else 0),
            )
        )
    conn.execute(delete(SEEN).where(SEEN.c.platform_id == platform_id, SEEN.c.learner == learner))
    conn.execute(delete(TOTALS).where(TOTALS.c.platform_id == platform_id, TOTALS.c.checks <= 0))


def totals(conn: Connection, platform_id: int, lesson: str) -> dict[str, tuple[int, int]]:
    """mistake -> (checks showing it, distinct learners)."""
    return {
        m: (int(n), int(who))
        for m, n, who in conn.execute(
            select(TOTALS.c.mistake, TOTALS.c.checks, TOTALS.c.learners).where(
                TOTALS.c.platform_id == platform_id, TOTALS.c.lesson == lesson
            )
        )
    }


def backfill(conn: Connection) -> None:
    """Count every check already stored (migration 0006; the tables start empty): added up in
    Python, written in batches."""
    checks: Counter = Counter()
    seen: set[tuple[int, str, str, str]] = set()
    rows = conn.execute(
        select(ExerciseCheck.platform_id, ExerciseCheck.lesson, ExerciseCheck.learner, ExerciseCheck.diagnosis).where(
            ExerciseCheck.diagnosis.is_not(None)
        )
    )
    for platform_id, lesson, learner, diagnosis in rows:
        for mistake in (diagnosis or "").split(","):
            checks[(platform_id, lesson, mistake)] += 1
            if learner is not None:
                seen.add((platform_id, lesson, mistake, learner))
    learners = Counter((p, lesson, m) for p, lesson, m, _ in seen)
    in_batches(
        conn, SEEN.insert(), [dict(platform_id=p, lesson=lesson, mistake=m, learner=who) for p, lesson, m, who in seen]
    )
    in_batches(
        conn,
        TOTALS.insert(),
        [
            dict(platform_id=p, lesson=lesson, mistake=m, checks=n, learners=learners[(p, lesson, m)])
            for (p, lesson, m), n in checks.items()
        ],
    )
