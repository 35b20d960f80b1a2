"""Event rollups: how many events, and how many distinct learners, per (lesson, key, bucket).

One definition serves three uses, so they cannot disagree:
- `aggregate(v, ...)` with no watermark counts raw events (a window's edges, dated totals);
- the refresh runs it over the events after the watermark and adds the counts to
  `event_rollups` (a learner counts in a group only if none of their events already rolled up
  is in it);
- a read adds the same aggregate over the events after the watermark to the stored rows, in
  one statement (one snapshot), so answers are exact however far the refresh has got.

Keys are text: '=' + the value, or '-' when the event has none (a checkpoint-less event, a
parameter that is not a short string). Buckets are 'YYYY-MM-DDTHH:MM:SS' (UTC) starts; weeks
start on Monday, as PostgreSQL's date_trunc('week') does.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import String, case, cast, exists, func, literal, literal_column, select, union_all
from sqlalchemy.engine import Connection
from sqlalchemy.sql import ColumnElement, Select

from ..tables import Event, EventRollup, RollupWatermark, cast_table

GRAINS = ("hour", "day", "week")
NAME_CAP = 128  # longer parameter names count as none (free text, and an index key must stay short)
EVENTS = cast_table(Event)
ROLLUPS = cast_table(EventRollup)


@dataclass(frozen=True)
class Variant:
    grain: str  # hour, day, week, or all (one bucket)
    # event, checkpoint, parameter (of parameter-changed events), cell (token edits), manipulation
    # (the lesson's manipulations reported by parameter-changed events)
    dimension: str
    per_lesson: bool  # False: every lesson together, stored under lesson ''


VARIANTS = tuple(
    Variant(grain, dimension, per_lesson)
    for grain in GRAINS
    for dimension in ("event", "checkpoint")
    for per_lesson in (True, False)
) + (Variant("all", "parameter", True), Variant("all", "cell", True), Variant("all", "manipulation", True))


def variant(grain: str, dimension: str, per_lesson: bool = True) -> Variant:
    found = Variant(grain, dimension, per_lesson)
    assert found in VARIANTS, found
    return found


def bucket_of(dialect: str, grain: str, column) -> ColumnElement:
    """The start of the bucket holding `column`, as text 'YYYY-MM-DDTHH:MM:SS' (UTC)."""
    if grain == "all":
        return literal("", String)
    if dialect == "postgresql":
        return func.to_char(func.date_trunc(grain, func.timezone("UTC", column)), 'YYYY-MM-DD"T"HH24:MI:SS')
    if grain == "hour":
        return func.strftime("%Y-%m-%dT%H:00:00", column)
    if grain == "day":
        return func.strftime("%Y-%m-%dT00:00:00", column)
    return func.strftime("%Y-%m-%dT00:00:00", column, literal_column("'weekday 0'"), literal_column("'-6 days'"))


LABEL = "%Y-%m-%dT%H:%M:%S"
_STEP = {"hour": dt.timedelta(hours=1), "day": dt.timedelta(days=1), "week": dt.timedelta(days=7)}


def bucket_floor(moment: dt.datetime, bucket: str) -> dt.datetime:
    moment = moment.astimezone(dt.UTC).replace(minute=0, second=0, microsecond=0)
    if bucket == "hour":
        return moment
    moment = moment.replace(hour=0)
    return moment if bucket == "day" else moment - dt.timedelta(days=moment.weekday())


def bucket_ceil(moment: dt.datetime, bucket: str) -> dt.datetime:
    floor = bucket_floor(moment, bucket)
    return floor if floor == moment else floor + _STEP[bucket]


def _json_string(dialect: str, data, field: str) -> ColumnElement:
    """data[field] when it is a string of at most NAME_CAP characters, else NULL."""
    if dialect == "postgresql":
        value = data.op("->>")(literal_column(f"'{field}'"))
        kind = func.json_typeof(data.op("->")(literal_column(f"'{field}'")))
        return case(((kind == "string") & (func.length(value) <= NAME_CAP), value))
    value = func.json_extract(data, f"$.{field}")
    return case(((func.json_type(data, f"$.{field}") == "text") & (func.length(value) <= NAME_CAP), value))


def _json_count(dialect: str, data, field: str) -> ColumnElement:
    """data[field] as text when it is a whole number from 0 to 999,999, else NULL."""
    if dialect == "postgresql":
        value = data.op("->>")(literal_column(f"'{field}'"))
        kind = func.json_typeof(data.op("->")(literal_column(f"'{field}'")))
        return case(((kind == "number") & value.op("~")(literal_column("'^[0-9]{1,6}$'")), value))
    value = func.json_extract(data, f"$.{field}")
    typed = func.json_type(data, f"$.{field}") == "integer"
    return case((typed & (value >= 0) & (value <= 999_999), cast(value, String)))


def _with_marker(value: ColumnElement) -> ColumnElement:
    return func.coalesce(literal("=", String).op("||")(value), literal("-", String))


def key_of(dialect: str, dimension: str, e) -> ColumnElement:
    c = e.c
    if dimension == "event":
        return literal("=", String).op("||")(c.event)
    if dimension == "checkpoint":
        return _with_marker(c.checkpoint)
    if dimension in ("parameter", "manipulation"):
        return _with_marker(_json_string(dialect, c.data, dimension))
    token, dim = _json_count(dialect, c.data, "token"), _json_count(dialect, c.data, "dimension")
    return literal("=", String).op("||")(token).op("||")(literal(",", String)).op("||")(dim)


def _only(dialect: str, dimension: str, e) -> list[ColumnElement]:
    """Which events a dimension counts."""
    c = e.c
    if dimension == "parameter":
        return [c.event == "parameter-changed"]
    if dimension == "manipulation":
        return [c.event == "parameter-changed", _json_string(dialect, c.data, "manipulation").is_not(None)]
    if dimension == "cell":
        return [
            c.event == "parameter-changed",
            _json_string(dialect, c.data, "parameter") == "token",
            _json_count(dialect, c.data, "token").is_not(None),
            _json_count(dialect, c.data, "dimension").is_not(None),
        ]
    return []


def decode_key(key: str) -> str | None:
    return None if key == "-" else key[1:]


Where = Callable[[Any], Iterable[ColumnElement]]


def aggregate(dialect: str, v: Variant, where: Where, seen_upto: ColumnElement | int | None = None) -> Select:
    """(platform_id, grain, lesson, dimension, bucket, key, events, learners) per group of the
    events `where` selects (given the events' alias). With `seen_upto`, a learner counts in a
    group only if none of their events with id <= seen_upto is in it.

    Grouped twice: first per learner within each group (each learner is checked once, not once
    per event), then per group."""
    c = EVENTS.alias("c")
    platform = c.c.platform_id + 0  # grouping on the bare column makes SQLite walk a platform index
    lesson = c.c.lesson if v.per_lesson else literal("", String)
    bucket, key = bucket_of(dialect, v.grain, c.c.occurred_at), key_of(dialect, v.dimension, c)
    g = (
        select(
            platform.label("platform"),
            lesson.label("lesson"),
            bucket.label("bucket"),
            key.label("key"),
            c.c.learner,
            func.count().label("events"),
        )
        .where(*_only(dialect, v.dimension, c), *where(c))
        .group_by(platform, bucket, key, c.c.learner, *([c.c.lesson] if v.per_lesson else []))
        .subquery("g")
    )
    if seen_upto is None:
        learners = func.count()
    else:
        p = EVENTS.alias("p")
        same = [
            p.c.platform_id == g.c.platform,
            p.c.learner == g.c.learner,
            p.c.id <= seen_upto,
            *_only(dialect, v.dimension, p),
            key_of(dialect, v.dimension, p) == g.c.key,
        ]
        if v.grain != "all":
            same.append(bucket_of(dialect, v.grain, p.c.occurred_at) == g.c.bucket)
        if v.per_lesson:
            same.append(p.c.lesson == g.c.lesson)
        learners = func.count(case((~exists().where(*same), 1)))
    return select(
        g.c.platform.label("rollup_platform"),
        literal(v.grain, String).label("rollup_grain"),
        g.c.lesson.label("rollup_lesson"),
        literal(v.dimension, String).label("rollup_dimension"),
        g.c.bucket.label("rollup_bucket"),
        g.c.key.label("rollup_key"),
        func.sum(g.c.events).label("rollup_events"),
        learners.label("rollup_learners"),
    ).group_by(g.c.platform, g.c.lesson, g.c.bucket, g.c.key)


def after(e, mark: int) -> ColumnElement:
    """Events after the watermark, found by id range (the primary key)."""
    return e.c.id > mark


def only_platform(e, platform_id: int) -> ColumnElement:
    """`platform_id = x` written so that no index on it is chosen over the id range: at the end
    of the log the id range is the narrow one, and both planners would otherwise scan a
    platform's whole index."""
    return (e.c.platform_id + 0) == platform_id


def watermark_now() -> ColumnElement:
    """The watermark as a scalar subquery (0 before the first refresh)."""
    return func.coalesce(select(RollupWatermark.last_event_id).where(RollupWatermark.id == 1).scalar_subquery(), 0)


def watermark(conn: Connection) -> int:
    """Up to which event id the rollups hold every event (in the caller's snapshot)."""
    return conn.execute(select(watermark_now())).scalar_one()


def in_batches(conn: Connection, statement, rows: list[dict], batch: int = 500) -> None:
    """Run `statement` for each row, `batch` rows per executemany."""
    for i in range(0, len(rows), batch):
        conn.execute(statement, rows[i : i + batch])


def counts(
    conn: Connection,
    v: Variant,
    platform_id: int,
    lesson: str | None,
    buckets: tuple[str, str | None],
    occurred: tuple[object, object],
) -> list[tuple[str, str | None, int, int]]:
    """(bucket, key, events, learners) for buckets in [buckets[0], buckets[1]) (None: no end):
    the stored rows plus the events after the watermark. `occurred` bounds the events after the
    watermark the same way, as datetimes. Call inside one snapshot (Database.snapshot)."""
    dialect = conn.dialect.name
    start, end = buckets
    stored = select(ROLLUPS.c.bucket, ROLLUPS.c.key, ROLLUPS.c.events, ROLLUPS.c.learners).where(
        ROLLUPS.c.platform_id == platform_id,
        ROLLUPS.c.grain == v.grain,
        ROLLUPS.c.lesson == (lesson or ""),
        ROLLUPS.c.dimension == v.dimension,
        ROLLUPS.c.bucket >= start,
    )
    if end is not None:
        stored = stored.where(ROLLUPS.c.bucket < end)

    mark = watermark(conn)

    def recent(c) -> list[ColumnElement]:
        conditions = [after(c, mark), only_platform(c, platform_id)]
        if lesson is not None:
            conditions.append(c.c.lesson == lesson)
        if occurred[0] is not None:
            conditions.append(c.c.occurred_at >= occurred[0])
        if occurred[1] is not None:
            conditions.append(c.c.occurred_at < occurred[1])
        return conditions

    tail = aggregate(dialect, v, recent, seen_upto=mark).subquery()
    both = union_all(
        stored,
        select(tail.c.rollup_bucket, tail.c.rollup_key, tail.c.rollup_events, tail.c.rollup_learners),
    ).subquery()
    query = (
        select(both.c.bucket, both.c.key, func.sum(both.c.events), func.sum(both.c.learners))
        .group_by(both.c.bucket, both.c.key)
        .order_by(both.c.bucket, both.c.key)
    )
    return [(b, decode_key(k), int(n), int(m)) for b, k, n, m in conn.execute(query)]


def raw_counts(conn: Connection, v: Variant, platform_id: int, lesson: str | None, start, end):
    """(bucket, key, events, learners) straight from the events in [start, end)."""

    def within(c) -> list[ColumnElement]:
        conditions = [c.c.platform_id == platform_id]
        if lesson is not None:
            conditions.append(c.c.lesson == lesson)
        if start is not None:
            conditions.append(c.c.occurred_at >= start)
        if end is not None:
            conditions.append(c.c.occurred_at < end)
        return conditions

    query = aggregate(conn.dialect.name, v, within).subquery()
    rows = conn.execute(
        select(query.c.rollup_bucket, query.c.rollup_key, query.c.rollup_events, query.c.rollup_learners)
    )
    return [(b, decode_key(k), int(n), int(m)) for b, k, n, m in rows]
