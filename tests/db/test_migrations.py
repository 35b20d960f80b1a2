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
