"""Funnel and durations rollups: each learner's standing in a lesson, counted.

A learner's standing is their start day, which checkpoints they have completed (and how each
test result was known), and the whole seconds from their first event to each completion. The
refresh (service/db/analytics/rollup_refresh.py) recomputes the standing of every learner its chunk of
events touched, takes their previous standing (kept in `rolled_learners`) out of the counts
and puts the new one in. A read adds the same correction for the learners with events after
the watermark, so answers are exact; the counts hold one row per (start day, state), not per
learner, so reads do not grow with the log.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import bindparam, delete, func, select
from sqlalchemy.engine import Connection

from ..events import dialect_insert
from ..tables import CheckpointProgress, DurationRollup, Event, LearnerLesson, LearnerRollup, RolledLearner, cast_table
from .rollups import LABEL, after, bucket_floor, in_batches, only_platform, watermark

Key = tuple[int, str, str]  # (platform_id, lesson, learner)
BATCH = 500


@dataclass(frozen=True)
class Standing:
    day: str  # start of the UTC day of the learner's first event in the lesson
    state: str  # "checkpoint:verification" for each completion, sorted, comma-joined
    durations: str  # "checkpoint=seconds" for each timed completion, sorted, comma-joined

    def checkpoints(self) -> dict[str, str]:
        """checkpoint -> verification ('' when none)."""
        return dict(part.split(":", 1) for part in self.state.split(",") if part)

    def seconds(self) -> dict[str, int]:
        return {c: int(s) for c, s in (part.split("=", 1) for part in self.durations.split(",") if part)}


def _groups(keys: list[Key]) -> Iterable[tuple[int, str, list[str]]]:
    """(platform, lesson, up to BATCH learners) covering these keys."""
    groups: dict[tuple[int, str], list[str]] = {}
    for platform, lesson, learner in keys:
        groups.setdefault((platform, lesson), []).append(learner)
    for (platform, lesson), learners in groups.items():
        for i in range(0, len(learners), BATCH):
            yield platform, lesson, learners[i : i + BATCH]


def _among(table, group: tuple[int, str, list[str]]):
    """Rows of one group: equality on platform and lesson and a plain IN on learners, which every
    index on the three serves (a row-value IN makes SQLite scan the table)."""
    platform, lesson, learners = group
    return (table.c.platform_id == platform) & (table.c.lesson == lesson) & table.c.learner.in_(learners)


def standings(conn: Connection, keys: list[Key]) -> dict[Key, Standing]:
    """The current standing of each learner who has started (from the progress tables)."""
    visits, progress = LearnerLesson.__table__, CheckpointProgress.__table__
    found: dict[Key, Standing] = {}
    for group in _groups(keys):
        starts = {
            (p, lesson, learner): first
            for p, lesson, learner, first in conn.execute(
                select(visits.c.platform_id, visits.c.lesson, visits.c.learner, visits.c.first_event_at).where(
                    _among(visits, group)
                )
            )
        }
        done: dict[Key, list] = {}
        for p, lesson, learner, checkpoint, how, seconds in conn.execute(
            select(
                progress.c.platform_id,
                progress.c.lesson,
                progress.c.learner,
                progress.c.checkpoint,
                progress.c.verification,
                progress.c.seconds_from_start,
            ).where(_among(progress, group))
        ):
            done.setdefault((p, lesson, learner), []).append((checkpoint, how, seconds))
        for key, first in starts.items():
            rows = sorted(done.get(key, []))
            found[key] = Standing(
                day=bucket_floor(first, "day").strftime(LABEL),
                state=",".join(f"{c}:{how or ''}" for c, how, _ in rows),
                durations=",".join(f"{c}={int(s)}" for c, _, s in rows if s is not None),
            )
    return found


def rolled(conn: Connection, keys: list[Key]) -> dict[Key, Standing]:
    """The standing each learner was last counted with."""
    table = cast_table(RolledLearner)
    found: dict[Key, Standing] = {}
    for group in _groups(keys):
        for p, lesson, learner, day, state, durations in conn.execute(
            select(
                table.c.platform_id, table.c.lesson, table.c.learner, table.c.day, table.c.state, table.c.durations
            ).where(_among(table, group))
        ):
            found[(p, lesson, learner)] = Standing(day, state, durations)
    return found


def touched(
    conn: Connection,
    low: int,
    high: int | None,
    platform_id: int | None = None,
    lesson: str | None = None,
    event: str | None = None,
):
    """The learners with events (of kind `event`, when given) whose id is in (low, high] (no
    upper bound when None)."""
    e = Event.__table__.alias("c")
    query = select(e.c.platform_id, e.c.lesson, e.c.learner).where(after(e, low))
    if event is not None:
        query = query.where(e.c.event == event)
    if high is not None:
        query = query.where(e.c.id <= high)
    if platform_id is not None:
        query = query.where(only_platform(e, platform_id), e.c.lesson == lesson)
    # Made distinct here: DISTINCT in SQL makes SQLite walk a covering index of the whole log.
    return list(dict.fromkeys(tuple(r) for r in conn.execute(query)))


def changes(old: dict[Key, Standing], new: dict[Key, Standing], keys: list[Key]) -> tuple[Counter, Counter]:
    """(what each (platform, lesson, day, state) count gains, what each (platform, lesson,
    checkpoint, seconds) count gains) when these learners move from `old` to `new`."""
    states: Counter = Counter()
    durations: Counter = Counter()
    for key in keys:
        for standing, sign in ((old.get(key), -1), (new.get(key), 1)):
            if standing is None:
                continue
            states[(key[0], key[1], standing.day, standing.state)] += sign
            for checkpoint, seconds in standing.seconds().items():
                durations[(key[0], key[1], checkpoint, seconds)] += sign
    return states, durations


def apply(conn: Connection, keys: list[Key]) -> None:
    """In the refresh's (or the erasure's) transaction: count these learners as they stand now."""
    if not keys:
        return
    old, new = rolled(conn, keys), standings(conn, keys)
    states, durations = changes(old, new, keys)
    _add(conn, cast_table(LearnerRollup), ("platform_id", "lesson", "day", "state"), states)
    _add(conn, cast_table(DurationRollup), ("platform_id", "lesson", "checkpoint", "seconds"), durations)
    table = cast_table(RolledLearner)
    for group in _groups(keys):
        conn.execute(delete(table).where(_among(table, group)))
    rows = [
        {"platform_id": k[0], "lesson": k[1], "learner": k[2], "day": s.day, "state": s.state, "durations": s.durations}
        for k, s in new.items()
    ]
    in_batches(conn, table.insert(), rows, BATCH)


def _add(conn: Connection, table, columns: tuple[str, ...], deltas: Counter) -> None:
    rows = [dict(zip(columns, key, strict=True), learners=n) for key, n in deltas.items() if n]
    add_deltas(conn, table, columns, ("learners",), rows)


def add_deltas(conn: Connection, table, keys: tuple[str, ...], values: tuple[str, ...], rows: list[dict]) -> None:
    """Add each row's `values` to the row of its `keys` (made when missing); then delete the rows
    a negative change left with no learners (`learners` <= 0)."""
    if not rows:
        return
    statement = dialect_insert(conn.dialect.name, table)
    statement = statement.on_conflict_do_update(
        index_elements=list(keys), set_={c: table.c[c] + statement.excluded[c] for c in values}
    )
    in_batches(conn, statement, rows, BATCH)
    emptied = [{c: r[c] for c in keys} for r in rows if r["learners"] < 0]
    if emptied:
        conn.execute(delete(table).where(*(table.c[c] == bindparam(c) for c in keys), table.c.learners <= 0), emptied)


def corrections(conn: Connection, platform_id: int, lesson: str) -> tuple[Counter, Counter]:
    """What the learners with events after the watermark change in the stored counts."""
    keys = touched(conn, watermark(conn), None, platform_id, lesson)
    return changes(rolled(conn, keys), standings(conn, keys), keys)


def state_counts(conn: Connection, platform_id: int, lesson: str, days: tuple[str, str | None]) -> Counter:
    """state -> learners who started the lesson on days in [days[0], days[1]) (None: no end).
    Call inside one snapshot (Database.snapshot)."""
    table = cast_table(LearnerRollup)
    query = select(table.c.state, func.sum(table.c.learners)).where(
        table.c.platform_id == platform_id, table.c.lesson == lesson, table.c.day >= days[0]
    )
    if days[1] is not None:
        query = query.where(table.c.day < days[1])
    counts = Counter({state: int(n) for state, n in conn.execute(query.group_by(table.c.state))})
    states, _ = corrections(conn, platform_id, lesson)
    for (_, _, day, state), n in states.items():
        if day >= days[0] and (days[1] is None or day < days[1]):
            counts[state] += n
    return +counts
