"""Quantiles of the time to complete each checkpoint, from the duration rollups. On PostgreSQL
they are computed where the rows are: the database adds the learners after the watermark (sent
as JSON), accumulates the counts per checkpoint in seconds order, and returns only the rows that
hold the ranks a quantile needs (four per quantile and checkpoint), instead of every whole second anyone took.
SQLite, whose window functions are slower than Python here, reads the lesson's rows once.

Exactly numpy's "linear" quantiles of the multiset {seconds: learners}.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from fractions import Fraction

import orjson
from sqlalchemy import select, text
from sqlalchemy.engine import Connection

from ..tables import DurationRollup, cast_table
from . import learner_rollups

CORRECTIONS = {
    "postgresql": "SELECT c.checkpoint, c.seconds, c.learners FROM json_to_recordset(CAST(:extra AS json)) "
    "AS c(checkpoint text, seconds bigint, learners bigint)",
    "sqlite": "SELECT json_extract(value, '$.checkpoint'), json_extract(value, '$.seconds'), "
    "json_extract(value, '$.learners') FROM json_each(:extra)",
}

QUERY = """
WITH d (checkpoint, seconds, learners) AS (
    SELECT checkpoint, seconds, learners FROM duration_rollups WHERE platform_id = :platform AND lesson = :lesson
    UNION ALL {corrections}
), agg AS (
    SELECT checkpoint, seconds, CAST(SUM(learners) AS BIGINT) AS n FROM d
    GROUP BY checkpoint, seconds HAVING SUM(learners) > 0
), running AS (
    SELECT checkpoint, seconds, n,
           CAST(SUM(n) OVER (PARTITION BY checkpoint ORDER BY seconds) AS BIGINT) AS upto,
           CAST(SUM(n) OVER (PARTITION BY checkpoint) AS BIGINT) AS total
    FROM agg
), cum AS (
    SELECT checkpoint, seconds, upto - n AS below, upto, total FROM running
)
SELECT checkpoint, seconds, below, upto, total FROM cum WHERE {ranks}
"""


def _rank(i: int) -> str:
    """The rank of quantile i, floor(q (total - 1)), in integer arithmetic (q = num/den, exact)."""
    return f"((total - 1) * :num{i}) / :den{i}"


def duration_quantiles(
    conn: Connection, platform_id: int, lesson: str, qs: tuple[float, ...]
) -> dict[str, tuple[int, list[float]]]:
    """checkpoint -> (learners, their quantiles `qs` of whole seconds), over every learner of the
    lesson; checkpoints nobody completed are absent."""
    _, corrections = learner_rollups.corrections(conn, platform_id, lesson)
    if conn.dialect.name == "sqlite":  # its window functions are slower than adding up in Python
        return _from_all_rows(conn, platform_id, lesson, corrections, qs)
    extra = [{"checkpoint": c, "seconds": s, "learners": n} for (_, _, c, s), n in corrections.items() if n]
    around = [f"{_rank(i)} + {step}" for i in range(len(qs)) for step in (-1, 0, 1, 2)]
    ranks = " OR ".join(f"(below <= {r} AND {r} < upto)" for r in around)
    fractions = [Fraction(q).limit_denominator(10_000) for q in qs]
    params: dict[str, object] = {"platform": platform_id, "lesson": lesson, "extra": orjson.dumps(extra).decode()}
    for i, f in enumerate(fractions):
        params[f"num{i}"], params[f"den{i}"] = f.numerator, f.denominator
    sql = QUERY.format(corrections=CORRECTIONS[conn.dialect.name], ranks=ranks)
    rows: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    totals: dict[str, int] = {}
    for checkpoint, seconds, below, upto, total in conn.execute(text(sql), params):
        rows[checkpoint].append((int(below), int(upto), int(seconds)))
        totals[checkpoint] = int(total)
    return {c: (totals[c], _quantiles(rows[c], totals[c], qs)) for c in rows}


def _from_all_rows(
    conn: Connection, platform_id: int, lesson: str, corrections: Counter, qs: tuple[float, ...]
) -> dict[str, tuple[int, list[float]]]:
    """The same answer from every row of the lesson, read once (SQLite)."""
    table = cast_table(DurationRollup)
    counts: dict[str, Counter] = defaultdict(Counter)
    query = select(table.c.checkpoint, table.c.seconds, table.c.learners).where(
        table.c.platform_id == platform_id, table.c.lesson == lesson
    )
    for checkpoint, seconds, n in conn.execute(query):
        counts[checkpoint][int(seconds)] += int(n)
    for (_, _, checkpoint, seconds), n in corrections.items():
        counts[checkpoint][seconds] += n
    found = {}
    for checkpoint, by_seconds in counts.items():
        rows, upto = [], 0
        for seconds, n in sorted((+by_seconds).items()):
            rows.append((upto, upto + n, seconds))
            upto += n
        if upto:
            found[checkpoint] = (upto, _quantiles(rows, upto, qs))
    return found


def _quantiles(rows: list[tuple[int, int, int]], n: int, qs: tuple[float, ...]) -> list[float]:
    """numpy's "linear" method in its float arithmetic, from the rows around each rank (a rank one
    off the exact one, where floats round, is among them)."""

    def at(rank: int) -> int:
        return next(seconds for below, upto, seconds in rows if below <= rank < upto)

    out = []
    for q in qs:
        low = int(q * (n - 1))
        out.append(linear(q, n, at(low), at(min(low + 1, n - 1))))
    return out


def linear(q: float, n: int, lower: float, upper: float) -> float:
    """The q quantile of n sorted values by numpy's "linear" method, given the values at the
    position's floor and the one after (never below 0)."""
    position = q * (n - 1)
    return max(0.0, lower + (position - int(position)) * (upper - lower))
