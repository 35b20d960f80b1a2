"""The schema is Alembic's: `upgrade head` equals the models on both backends, and goes back down."""

import ast
import datetime as dt
import re
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text

from service.db.base import Base
from service.db.engine import Database
from service.db.events import EventConflict, NewEvent, write_events
from service.db.migrate import downgrade, upgrade

TABLES = {"platforms", "api_keys", "events", "checkpoint_progress", "erased_events", "exercise_checks"}


# PostgreSQL keeps events in monthly partitions (migration 0007), which the models do not say:
# (platform_id, event_id) is unique through the event_ids table, and time has BRIN indexes.
PARTITIONING = {
    ("remove_table", "event_ids"),
    ("remove_index", "ix_events_occurred_brin"),
    ("remove_index", "ix_events_stored_brin"),
    ("add_constraint", "events(platform_id, event_id)"),
}


def _diff(url: str) -> set:
    """What the schema has that the models do not (or the reverse), months' partitions aside."""
    engine = create_engine(url)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata)
    engine.dispose()
    return {_described(item) for item in diff} - {None}


def _described(item) -> tuple | None:
    if not isinstance(item, tuple):
        return ("changed", repr(item))
    kind, thing = item[0], item[1]
    table = getattr(thing, "table", thing)
    if re.fullmatch(r"events_(\d{4}_\d{2}|default)", getattr(table, "name", "")):
        return None  # a month of the event log
    if kind == "add_constraint":
        return (kind, f"{table.name}({', '.join(c.name for c in thing.columns)})")
    return (kind, thing.name)


def test_upgrade_head_matches_the_models(empty_database):
    upgrade(empty_database)
    assert _diff(empty_database) == (PARTITIONING if empty_database.startswith("postgresql") else set())
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
    assert _diff(empty_database) == (PARTITIONING if empty_database.startswith("postgresql") else set())


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


def test_0007_moves_the_event_log_into_months_and_keeps_its_ids(empty_database):
    """PostgreSQL: events stored under 0006 are in their months after 0007, their ids still
    refuse a different event, and new rows continue the id sequence."""
    if not empty_database.startswith("postgresql"):
        pytest.skip("SQLite keeps the event log in one table")
    upgrade(empty_database, "0006")
    engine = create_engine(empty_database)
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO platforms (id, name, home_page, created_at) VALUES (1, 'acme', 'x', now())"))
        for i, at in enumerate(["2025-03-04 10:00:00+00", "2026-11-02 10:00:00+00"]):
            conn.execute(
                text(
                    "INSERT INTO events (platform_id, event_id, learner, lesson, event, data, occurred_at, "
                    "stored_at, content_hash) VALUES (1, :id, 'ada', 'm', 'started', '{}', :t, :t, 'h')"
                ),
                {"id": f"e{i}", "t": at},
            )
    upgrade(empty_database)
    with engine.begin() as conn:
        assert conn.execute(text("SELECT event_id FROM events_2025_03")).scalars().all() == ["e0"]
        assert conn.execute(text("SELECT count(*) FROM events_default")).scalar() == 0
        assert conn.execute(text("SELECT count(*) FROM event_ids")).scalar() == 2
        conn.execute(
            text(
                "INSERT INTO events (platform_id, event_id, learner, lesson, event, data, occurred_at, stored_at, "
                "content_hash) VALUES (1, 'e2', 'ada', 'm', 'started', '{}', now(), now(), 'h')"
            )
        )
        assert conn.execute(text("SELECT id FROM events WHERE event_id = 'e2'")).scalar() == 3
    engine.dispose()
    db = Database(empty_database)
    changed = NewEvent("e0", "ada", "m", None, "completed", None, {}, dt.datetime(2025, 3, 4, tzinfo=dt.UTC))
    with pytest.raises(EventConflict):
        write_events(db, 1, [changed], {})
    db.dispose()


MIGRATIONS = Path(__file__).resolve().parents[2] / "migrations" / "versions"


def _script():
    import sys

    from alembic.config import Config
    from alembic.script import ScriptDirectory

    if str(MIGRATIONS.parent) not in sys.path:
        sys.path.insert(0, str(MIGRATIONS.parent))  # migrations/stored.py, as env.py does
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS.parent))
    return ScriptDirectory.from_config(config)


def _function_versions() -> dict[str, str]:
    """Every version of the stored function, by the revision that installs it, oldest first."""
    from stored import version

    script = _script()
    revisions = [r for r in reversed(list(script.walk_revisions()))]
    found = [r.revision for r in revisions if hasattr(r.module, "FUNCTION") or hasattr(r.module, "FUNCTION_EDITS")]
    return {revision: version(revision, script) for revision in found}


def test_no_migration_imports_the_application():
    for path in MIGRATIONS.glob("*.py"):
        imported = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                imported.add((node.module or "").split(".")[0])
        assert not imported & {"service", "importlib"}, f"{path.name} imports {imported & {'service', 'importlib'}}"


def _body(sql: str) -> str:
    return sql.split("$fn$")[1]


def test_each_version_of_the_stored_function_is_written_once_as_edits_of_the_one_before():
    """The first version is whole in its migration; each later one holds only its edits, and every
    edit applied exactly once (stored.version raises otherwise)."""
    versions = _function_versions()
    assert list(versions) == ["0005", "0007", "0009", "0013"]
    script = _script()
    for revision in list(versions)[1:]:
        module = script.get_revision(revision).module
        assert not hasattr(module, "FUNCTION")
        before, _ = module.FUNCTION_EDITS
        assert before == list(versions)[list(versions).index(revision) - 1]
    texts = list(versions.values())
    assert len(set(texts)) == len(texts)  # each edit changed something
    assert all("CREATE OR REPLACE FUNCTION workbench_record_events(" in t for t in texts)


def test_postgresql_runs_the_newest_version_after_upgrade_and_the_one_before_after_a_downgrade(empty_database):
    if not empty_database.startswith("postgresql"):
        pytest.skip("SQLite records events with statements (service/db/events/sqlite.py)")
    versions = _function_versions()

    def installed() -> str:
        engine = create_engine(empty_database)
        with engine.connect() as conn:
            found = conn.execute(text("SELECT prosrc FROM pg_proc WHERE proname = 'workbench_record_events'")).scalar()
        engine.dispose()
        return found

    upgrade(empty_database)
    assert installed() == _body(versions["0013"])
    downgrade(empty_database, "0012")
    assert installed() == _body(versions["0009"])


def test_0009_counts_the_manipulations_already_rolled_up(empty_database):
    """Events rolled up under 0008 are in the new manipulation rollups once 0009 has run, once."""
    upgrade(empty_database, "0008")
    engine = create_engine(empty_database)
    with engine.begin() as conn:
        conn.execute(
            text("INSERT INTO platforms (id, name, home_page, created_at) VALUES (1, 'acme', 'x', :t)"),
            {"t": "2026-11-02"},
        )
        for i, (learner, manipulation) in enumerate([("ada", "last-two"), ("ada", "last-two"), ("bob", "last-two")]):
            conn.execute(
                text(
                    "INSERT INTO events (platform_id, event_id, learner, lesson, checkpoint, event, instance_id, data, "
                    "occurred_at, stored_at, content_hash) VALUES (1, :id, :learner, 'm', 'experiment', "
                    "'parameter-changed', 'multi-head-workbench', :data, :t, :t, 'h')"
                ),
                {
                    "id": f"e{i}",
                    "learner": learner,
                    "data": f'{{"manipulation": "{manipulation}"}}',
                    "t": f"2026-11-02 10:0{i}:00+00:00",
                },
            )
        from service.db.analytics.rollup_refresh import refresh_on

        refresh_on(conn)  # the refresh of 0008's code: no manipulation dimension yet
    upgrade(empty_database)
    with engine.begin() as conn:
        rows = conn.execute(
            text("SELECT key, events, learners FROM event_rollups WHERE dimension = 'manipulation' AND lesson = 'm'")
        ).all()
    engine.dispose()
    assert [tuple(r) for r in rows] == [("=last-two", 3, 2)]
