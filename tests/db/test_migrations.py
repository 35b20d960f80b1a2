"""The schema is Alembic's: `upgrade head` equals the models on both backends, and goes back down."""

import uuid

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text

from service.db.base import Base
from service.db.migrate import downgrade, upgrade
from tests.conftest import PG_URL

TABLES = {"platforms", "api_keys", "events", "checkpoint_progress", "erased_events", "exercise_checks"}


def _diff(url: str) -> list:
    engine = create_engine(url)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata)
    engine.dispose()
    return diff


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_database(request, tmp_path):
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'fresh.db'}"
        return
    if not PG_URL:
        pytest.skip("PostgreSQL tests need WORKBENCH_TEST_DATABASE_URL (set by .ci/run)")
    name = f"workbench_mig_{uuid.uuid4().hex[:8]}"
    admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    yield PG_URL.rsplit("/", 1)[0] + f"/{name}"
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def test_upgrade_head_matches_the_models(empty_database):
    upgrade(empty_database)
    assert _diff(empty_database) == []
    engine = create_engine(empty_database)
    assert TABLES <= set(inspect(engine).get_table_names())
    engine.dispose()


def test_downgrade_to_base_and_up_again(empty_database):
    upgrade(empty_database)
    downgrade(empty_database, "base")
    engine = create_engine(empty_database)
    assert not TABLES & set(inspect(engine).get_table_names())
    engine.dispose()
    upgrade(empty_database)
    assert _diff(empty_database) == []


def test_analytics_indexes_exist(empty_database):
    upgrade(empty_database)
    engine = create_engine(empty_database)
    names = {ix["name"] for ix in inspect(engine).get_indexes("events")}
    engine.dispose()
    assert {"ix_events_platform_stored", "ix_events_platform_lesson_learner"} <= names


def test_0006_rolls_up_what_was_stored_before_it(empty_database):
    """Events and checks stored under 0005 are in the rollups once 0006 has run, and an id freed
    by deleting the newest event is never handed out again on SQLite."""
    upgrade(empty_database, "0005")
    engine = create_engine(empty_database)
    with engine.begin() as conn:
        conn.execute(
            text("INSERT INTO platforms (id, name, home_page, created_at) VALUES (1, 'acme', 'x', :t)"),
            {"t": "2026-11-02"},
        )
        for i, (learner, kind) in enumerate([("ada", "started"), ("ada", "completed"), ("bob", "started")]):
            conn.execute(
                text(
                    "INSERT INTO events (platform_id, event_id, learner, lesson, checkpoint, event, data, occurred_at, "
                    "stored_at, content_hash) VALUES (1, :id, :learner, 'm', NULL, :kind, '{}', :t, :t, 'h')"
                ),
                {"id": f"e{i}", "learner": learner, "kind": kind, "t": f"2026-11-02 10:0{i}:00+00:00"},
            )
        conn.execute(
            text(
                'INSERT INTO exercise_checks (platform_id, learner, lesson, "case", correct, diagnosis, created_at) '
                "VALUES (1, 'ada', 'm', '{}', false, 'no_mask,no_scaling', :t), "
                "(1, 'bob', 'm', '{}', false, 'no_mask', :t)"
            ),
            {"t": "2026-11-02 10:00:00+00:00"},
        )
    upgrade(empty_database)
    with engine.begin() as conn:
        rows = conn.execute(
            text(
                "SELECT key, events, learners FROM event_rollups "
                "WHERE grain = 'day' AND dimension = 'event' AND lesson = 'm'"
            )
        ).all()
        assert sorted(tuple(r) for r in rows) == [("=completed", 1, 1), ("=started", 2, 2)]
        assert conn.execute(text("SELECT last_event_id FROM rollup_watermark")).scalar() == 3
        mistakes = conn.execute(text("SELECT mistake, checks, learners FROM mistake_rollups ORDER BY mistake")).all()
        assert [tuple(r) for r in mistakes] == [("no_mask", 2, 2), ("no_scaling", 1, 1)]
        conn.execute(text("DELETE FROM events WHERE id = 3"))
        conn.execute(
            text(
                "INSERT INTO events (platform_id, event_id, learner, lesson, event, data, occurred_at, stored_at, "
                "content_hash) VALUES (1, 'e9', 'cy', 'm', 'started', '{}', :t, :t, 'h')"
            ),
            {"t": "2026-11-02 11:00:00+00:00"},
        )
        assert conn.execute(text("SELECT id FROM events WHERE event_id = 'e9'")).scalar() == 4
    engine.dispose()
