"""Item statistics rollups: each learner's latest answers, summed so that correct rates,
point-biserial discrimination and the normalized gain are read from a few rows per item.

A learner's answers are their latest answered event per (phase, item), with the score the server
gave it when it was recorded. What one learner adds to the sums (`contributions`):
- `choice` phase/item/response/score: one learner;
- `pair` phase/item: n = 1, x = the item's score (0 or 1), y = the rest score (their correct
  answers to the phase's other items), x*y and y^2: Pearson's r of x and y from the sums;
- `gain` pre-items/post-items answered: one learner, their pre and post correct counts.
The refresh (rollup_refresh.py) re-derives the answers of every learner its chunk touched, takes
what they added before (`rolled_answers`) out and adds the new; erasure takes them out; a read
adds the same correction for learners with events after the watermark, so figures are exact and
their cost grows with the items, not the log.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.engine import Connection

from ..tables import Event, ItemRollup, RolledAnswer, cast_table
from .learner_rollups import BATCH, Key, _among, _groups, add_deltas, touched
from .rollups import in_batches, watermark

SUMS = ("learners", "sx", "sy", "sxy", "syy")
Sums = dict[tuple[str, str], list[int]]  # (dimension, key) -> the SUMS


@dataclass(frozen=True)
class Answer:
    phase: str
    item: str
    response: str  # a choice id, or a number as Python writes a float (2 and 2.0 both "2.0")
    correct: bool

    def entry(self) -> str:
        return f"{self.phase}.{self.item}={self.response}:{int(self.correct)}"


def parse(state: str) -> list[Answer]:
    answers = []
    for entry in filter(None, state.split(";")):
        where, _, rest = entry.partition("=")
        phase, _, item = where.partition(".")
        response, _, score = rest.rpartition(":")
        answers.append(Answer(phase, item, response, score == "1"))
    return answers


def contributions(state: str) -> Sums:
    """What one learner with these latest answers adds to the sums."""
    sums: Sums = defaultdict(lambda: [0] * len(SUMS))
    answers = parse(state)
    correct = Counter(a.phase for a in answers if a.correct)
    answered = Counter(a.phase for a in answers)
    for a in answers:
        sums[("choice", f"{a.phase}/{a.item}/{a.response}/{int(a.correct)}")][0] += 1
        x, y = int(a.correct), correct[a.phase] - int(a.correct)
        for i, value in enumerate((1, x, y, x * y, y * y)):
            sums[("pair", f"{a.phase}/{a.item}")][i] += value
    if answered["pre"] and answered["post"]:
        gain = sums[("gain", f"{answered['pre']}/{answered['post']}")]
        gain[0], gain[1], gain[2] = 1, correct["pre"], correct["post"]
    return sums


def answers_now(conn: Connection, keys: list[Key]) -> dict[Key, str]:
    """Each learner's latest answers as a state ('' when none), from their answered events."""
    e = cast_table(Event)
    found: dict[Key, dict[tuple[str, str], Answer]] = {k: {} for k in keys}
    for group in _groups(keys):
        # Every event of the group's learners, answers picked here: with `event = 'answered'` in
        # SQL, both databases took the lesson's index by event kind and read every answer of the
        # lesson for each group (SQLite 4.5 s against 27 ms a group at 1M events).
        rows = sorted(
            (
                r
                for r in conn.execute(
                    select(
                        e.c.platform_id, e.c.lesson, e.c.learner, e.c.item, e.c.data, e.c.occurred_at, e.c.id, e.c.event
                    ).where(_among(e, group))
                )
                if r.event == "answered"
            ),
            key=lambda r: (r.occurred_at, r.id),  # later answers win
        )
        for platform, lesson, learner, item, data, _, _, _ in rows:
            phase, response = data.get("phase"), data.get("response")
            if item is None or phase is None or response is None:
                continue
            said = response if isinstance(response, str) else repr(float(response))  # 2 and 2.0: one group
            found[(platform, lesson, learner)][(phase, item)] = Answer(phase, item, said, bool(data.get("correct")))
    return {k: ";".join(sorted(a.entry() for a in latest.values())) for k, latest in found.items()}


def rolled(conn: Connection, keys: list[Key]) -> dict[Key, str]:
    table = cast_table(RolledAnswer)
    found: dict[Key, str] = {}
    for group in _groups(keys):
        for p, lesson, learner, state in conn.execute(
            select(table.c.platform_id, table.c.lesson, table.c.learner, table.c.state).where(_among(table, group))
        ):
            found[(p, lesson, learner)] = state
    return found


def changes(old: dict[Key, str], new: dict[Key, str], keys: list[Key]) -> dict[tuple[int, str], Sums]:
    """(platform, lesson) -> what its sums gain when these learners move from `old` to `new`."""
    deltas: dict[tuple[int, str], Sums] = defaultdict(lambda: defaultdict(lambda: [0] * len(SUMS)))
    for key in keys:
        for state, sign in ((old.get(key, ""), -1), (new.get(key, ""), 1)):
            for where, values in contributions(state).items():
                total = deltas[(key[0], key[1])][where]
                for i, v in enumerate(values):
                    total[i] += sign * v
    return deltas


def apply(conn: Connection, keys: list[Key]) -> None:
    """In the refresh's (or the erasure's) transaction: count these learners' answers as they are now."""
    if not keys:
        return
    old, new = rolled(conn, keys), answers_now(conn, keys)
    table = cast_table(ItemRollup)
    rows: list[dict[str, Any]] = [
        {"platform_id": p, "lesson": lesson, "dimension": d, "key": k, **dict(zip(SUMS, v, strict=True))}
        for (p, lesson), sums in changes(old, new, keys).items()
        for (d, k), v in sums.items()
        if any(v)
    ]
    add_deltas(conn, table, ("platform_id", "lesson", "dimension", "key"), SUMS, rows)
    answers = cast_table(RolledAnswer)
    for group in _groups(keys):
        conn.execute(delete(answers).where(_among(answers, group)))
    kept = [{"platform_id": k[0], "lesson": k[1], "learner": k[2], "state": s} for k, s in new.items() if s]
    in_batches(conn, answers.insert(), kept, BATCH)


def touched_answers(
    conn: Connection, low: int, high: int | None, platform_id: int | None = None, lesson: str | None = None
):
    """Learners with answered events whose id is in (low, high]."""
    return touched(conn, low, high, platform_id, lesson, event="answered")


def sums(conn: Connection, platform_id: int, lesson: str) -> Sums:
    """The lesson's sums over every learner's latest answers (the rollups plus the learners with
    answers after the watermark). Call inside one snapshot (Database.snapshot)."""
    table = cast_table(ItemRollup)
    found: Sums = defaultdict(lambda: [0] * len(SUMS))
    for d, k, *values in conn.execute(
        select(table.c.dimension, table.c.key, *(table.c[c] for c in SUMS)).where(
            table.c.platform_id == platform_id, table.c.lesson == lesson
        )
    ):
        found[(d, k)] = [int(v) for v in values]
    keys = touched_answers(conn, watermark(conn), None, platform_id, lesson)
    for where, values in changes(rolled(conn, keys), answers_now(conn, keys), keys)[(platform_id, lesson)].items():
        found[where] = [a + b for a, b in zip(found[where], values, strict=True)]
    return {where: v for where, v in found.items() if v[0] > 0}
