"""Keeping `event_rollups` current: the refresh rolls up the events after the watermark in
chunks (set-based SQL, the definition in service/db/analytics/rollups.py); erasure takes a learner's
rolled-up events back out. Both hold the watermark row while they work, so they take turns.

Events are rolled up by id. On PostgreSQL ids are handed out before their transactions commit,
so the refresh first waits for the writes in flight (a brief EXCLUSIVE lock on `events`, which
lets readers through) and rolls up only to the highest id seen then: no event can commit later
with a smaller id. On SQLite writers take turns, so every id below the highest is committed.
"""

from __future__ import annotations

from sqlalchemy import delete, func, select, text, update
from sqlalchemy.engine import Connection

from ..engine import Database
from ..events import dialect_insert
from ..tables import Event, RolledAnswer, RolledLearner, RollupWatermark, cast_table
from . import item_rollups, learner_rollups
from .rollups import ROLLUPS, VARIANTS, aggregate, watermark_now

CHUNK = 20_000  # events per transaction: short enough that ingest never waits long for the refresh
PK = ("platform_id", "grain", "lesson", "dimension", "bucket", "key")


def refresh(db: Database, chunk: int = CHUNK) -> int:
    """Roll up every event committed before the call, a chunk per transaction; how many ids the
    watermark moved."""
    high = committed_high(db, Event)
    moved = 0
    while True:
        with db.write() as session:
            step = refresh_on(session.connection(), high, chunk)
        if step == 0:
            return moved
        moved += step
        if not db.is_sqlite and step >= ANALYZE_AFTER:
            _analyze(db)


def committed_high(db: Database, model) -> int:
    """The highest id of `model`'s table below which every row is committed: on PostgreSQL
    after the writes in flight (a brief EXCLUSIVE lock, which lets readers through)."""
    if db.is_sqlite:
        with db.read() as session:
            return session.execute(select(func.max(model.id))).scalar() or 0
    with db.write() as session:
        session.execute(text(f"LOCK TABLE {model.__tablename__} IN EXCLUSIVE MODE"))
        return session.execute(select(func.max(model.id))).scalar() or 0


ANALYZE_AFTER = 10_000


def _analyze(db: Database) -> None:
    """PostgreSQL: fresh statistics for the tables a large catch-up just grew. Planned with an
    empty `rolled_learners`' statistics, looking up 500 learners scanned every row of the
    lesson (a second a batch); autovacuum would only catch up a minute later."""
    with db.reader.connect() as conn:  # autocommit
        conn.exec_driver_sql("ANALYZE rolled_learners, learner_rollups, duration_rollups, event_rollups")


def catch_up(db: Database, tail: int) -> None:
    """Refresh first when more than `tail` events wait after the watermark (reads add up the
    rest themselves)."""
    with db.read() as session:
        mark, top = session.execute(
            select(
                watermark_now(),
                func.coalesce(select(func.max(Event.id)).scalar_subquery(), 0),
            )
        ).one()
    if top - mark > tail:
        refresh(db)


def refresh_on(conn: Connection, high: int | None = None, chunk: int | None = None) -> int:
    """In the caller's transaction: roll up events after the watermark up to `high` (every event
    when None), at most `chunk` ids of them (no limit when None); how many ids the watermark moved."""
    low = hold_watermark(conn)
    if high is None:
        if conn.dialect.name == "postgresql":
            conn.execute(text("LOCK TABLE events IN EXCLUSIVE MODE"))
        high = conn.execute(select(func.max(Event.id))).scalar() or 0
    start = low
    while low < high:
        upto = high if chunk is None else min(high, low + chunk)
        for v in VARIANTS:
            conn.execute(_add(conn.dialect.name, v, low, upto))
        learner_rollups.apply(conn, learner_rollups.touched(conn, low, upto))
        item_rollups.apply(conn, item_rollups.touched_answers(conn, low, upto))
        low = upto
        if chunk is not None:
            break
    if low != start:
        conn.execute(update(RollupWatermark).where(RollupWatermark.id == 1).values(last_event_id=low))
    return low - start


def add_variant_upto_watermark(conn: Connection, v) -> None:
    """A variant new to the rollups (a migration added it): made again from the events already
    rolled up, so it agrees with the others. Idempotent, and safe beside a refresh that already
    knew the variant (the watermark's row is held)."""
    mark = hold_watermark(conn)
    conn.execute(delete(ROLLUPS).where(ROLLUPS.c.grain == v.grain, ROLLUPS.c.dimension == v.dimension))
    if mark:
        conn.execute(_add(conn.dialect.name, v, 0, mark))


def _add(dialect: str, v, low: int, high: int):
    """INSERT ... SELECT: the events in (low, high] added to their groups."""
    # From the start of the log nothing is rolled up yet: no learner needs looking for.
    rows = aggregate(dialect, v, lambda c: [c.c.id > low, c.c.id <= high], seen_upto=low or None)
    statement = dialect_insert(dialect, ROLLUPS).from_select([*PK, "events", "learners"], rows)
    return statement.on_conflict_do_update(
        index_elements=list(PK),
        set_={
            "events": ROLLUPS.c.events + statement.excluded.events,
            "learners": ROLLUPS.c.learners + statement.excluded.learners,
        },
    )


def hold_watermark(conn: Connection) -> int:
    """The watermark, its row locked until the transaction ends (created at 0 the first time)."""
    conn.execute(
        dialect_insert(conn.dialect.name, RollupWatermark.__table__)
        .values(id=1, last_event_id=0)
        .on_conflict_do_nothing(index_elements=["id"])
    )
    return conn.execute(
        select(RollupWatermark.last_event_id).where(RollupWatermark.id == 1).with_for_update()
    ).scalar_one()


def forget_learner(conn: Connection, platform_id: int, learner: str) -> None:
    """In the erasure's transaction, before anything goes: take the learner's rolled-up events
    out of every group they count in (their standing goes in `forget_standing`, after)."""
    mark = hold_watermark(conn)
    changed = False
    for v in VARIANTS:
        rows = conn.execute(
            aggregate(
                conn.dialect.name,
                v,
                lambda c: [c.c.platform_id == platform_id, c.c.learner == learner, c.c.id <= mark],
            )
        ).all()
        for _, grain, lesson, dimension, bucket, key, events, learners in rows:
            changed = True
            conn.execute(
                update(ROLLUPS)
                .where(
                    ROLLUPS.c.platform_id == platform_id,
                    ROLLUPS.c.grain == grain,
                    ROLLUPS.c.lesson == lesson,
                    ROLLUPS.c.dimension == dimension,
                    ROLLUPS.c.bucket == bucket,
                    ROLLUPS.c.key == key,
                )
                .values(events=ROLLUPS.c.events - events, learners=ROLLUPS.c.learners - learners)
            )
    if changed:
        conn.execute(delete(ROLLUPS).where(ROLLUPS.c.platform_id == platform_id, ROLLUPS.c.events <= 0))


def forget_standing(conn: Connection, platform_id: int, learner: str) -> None:
    """In the erasure's transaction, after their progress and events went: take the learner out
    of the funnel, durations and item counts."""
    learner_rollups.apply(conn, _rolled_keys(conn, RolledLearner, platform_id, learner))
    item_rollups.apply(conn, _rolled_keys(conn, RolledAnswer, platform_id, learner))


def _rolled_keys(conn: Connection, model, platform_id: int, learner: str) -> list:
    """The (platform, lesson, learner) keys one learner is counted with in a standings table."""
    table = cast_table(model)
    query = select(table.c.platform_id, table.c.lesson, table.c.learner)
    return [tuple(k) for k in conn.execute(query.where(table.c.platform_id == platform_id, table.c.learner == learner))]
