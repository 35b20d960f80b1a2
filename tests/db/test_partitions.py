"""The event log by month (PostgreSQL) and retention (both backends): events land in their
month, months are made ahead, stray rows find their month, and retention removes only events
the rollups have counted, which go on counting them."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import func, insert, select, text

from service.db import analytics as q
from service.db import partitions
from service.db.analytics.rollup_refresh import refresh
from service.db.engine import Database
from service.db.events import NewEvent, record_events
from service.db.migrate import upgrade
from service.db.platforms import ensure_platform
from service.db.tables import Event
from service.lessons import load_lessons

NOW = dt.datetime(2026, 11, 15, 12, tzinfo=dt.UTC)
LESSONS = load_lessons("content/lessons")


@pytest.fixture
def db(empty_database):
    upgrade(empty_database)
    database = Database(empty_database)
    yield database
    database.dispose()


@pytest.fixture
def platform(db) -> int:
    with db.write() as session:
        return ensure_platform(session, "acme").id


def store(db: Database, platform: int, stored_at: dt.datetime, n: int, tag: str) -> None:
    """`n` events as if stored at `stored_at` (the service stamps its own clock)."""
    rows = [
        {
            "platform_id": platform,
            "event_id": f"{tag}-{i}",
            "learner": f"learner-{i}",
            "lesson": "multi-head-attention",
            "event": "started",
            "data": {},
            "occurred_at": stored_at,
            "stored_at": stored_at,
            "content_hash": "h",
        }
        for i in range(n)
    ]
    with db.write() as session:
        session.execute(insert(Event), rows)


def kept(db: Database) -> int:
    with db.read() as session:
        return session.execute(select(func.count()).select_from(Event)).scalar_one()


def events_per_month(db: Database, platform: int) -> dict[str, int]:
    """What an instructor's monthly chart of all events shows (rollups plus raw tail)."""
    with db.read() as session:
        rows = q.timeseries(session, platform, "day", "event", q.Window(), None)
    totals: dict[str, int] = {}
    for day, _, events, _ in rows:
        totals[day[:7]] = totals.get(day[:7], 0) + events
    return totals


def partition_rows(db: Database) -> dict[str, int]:
    with db.read() as session:
        names = [partitions.partition_name(m) for m in partitions.months(session.connection())] + ["events_default"]
        return {n: session.execute(text(f"SELECT count(*) FROM {n}")).scalar_one() for n in names}


def postgresql_only(db: Database) -> None:
    if db.is_sqlite:
        pytest.skip("SQLite keeps the event log in one table")


def test_an_ingested_event_lands_in_the_month_it_was_stored(db, platform):
    postgresql_only(db)
    event = NewEvent("e-1", "ada", "multi-head-attention", None, "started", None, {}, NOW)
    assert record_events(db, platform, [event], LESSONS).created == ["e-1"]
    assert record_events(db, platform, [event], LESSONS).replayed == ["e-1"]
    month = partitions.partition_name(partitions.month_of(dt.datetime.now(dt.UTC)))
    assert partition_rows(db)[month] == 1


def test_maintenance_makes_months_ahead_and_moves_stray_rows_into_theirs(db, platform):
    postgresql_only(db)
    store(db, platform, dt.datetime(2031, 3, 5, tzinfo=dt.UTC), 3, "far")  # no month for it yet
    assert partition_rows(db)["events_default"] == 3
    done = partitions.maintain(db, now=NOW)
    assert "events_2031_03" in done.created and done.moved == 3
    rows = partition_rows(db)
    assert rows["events_2031_03"] == 3 and rows["events_default"] == 0
    ahead = [partitions.partition_name(partitions.add_months(dt.date(2026, 11, 1), k)) for k in range(4)]
    assert set(ahead) <= set(rows)
    assert kept(db) == 3
    assert partitions.maintain(db, now=NOW).created == []  # nothing left to do


def test_retention_removes_only_what_the_rollups_hold_and_they_keep_counting_it(db, platform):
    store(db, platform, dt.datetime(2025, 1, 10, tzinfo=dt.UTC), 4, "jan")
    store(db, platform, dt.datetime(2025, 2, 10, tzinfo=dt.UTC), 5, "feb")
    store(db, platform, dt.datetime(2026, 11, 10, tzinfo=dt.UTC), 2, "nov")
    partitions.maintain(db, now=NOW)  # PostgreSQL: the old months get partitions of their own
    refresh(db)
    store(db, platform, dt.datetime(2025, 1, 20, tzinfo=dt.UTC), 1, "late")  # not rolled up yet
    before = events_per_month(db, platform)
    assert before == {"2025-01": 5, "2025-02": 5, "2026-11": 2}

    done = partitions.maintain(db, keep_months=12, now=NOW)  # keeps November 2025 onwards

    if db.is_sqlite:
        assert done.deleted == 9 and kept(db) == 3  # the late January event waits for a refresh
    else:
        assert done.dropped == ["events_2025_02"] and done.held == ["events_2025_01"]
        assert kept(db) == 2 + 4 + 1
    assert events_per_month(db, platform) == before
    refresh(db)
    partitions.maintain(db, keep_months=12, now=NOW)
    assert kept(db) == 2
    assert events_per_month(db, platform) == before


def test_retention_zero_keeps_everything(db, platform):
    store(db, platform, dt.datetime(2020, 1, 1, tzinfo=dt.UTC), 2, "old")
    refresh(db)
    done = partitions.maintain(db, keep_months=0, now=NOW)
    assert (done.dropped, done.deleted, kept(db)) == ([], 0, 2)
