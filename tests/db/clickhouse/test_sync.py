"""The sync (service/db/clickhouse/sync.py): a second sync and a sync interrupted mid-batch add
nothing; retention takes the same events as the primary's; an erased learner's rows cannot be read
afterwards; the command migrates, syncs and says what it copied; one sync at a time."""

import pytest

from service.db.clickhouse import AnalyticsUnavailable, ClickHouse
from service.db.clickhouse.schema import TABLES
from service.db.clickhouse.sync import sync
from service.db.tables import AnalyticsErasure, Event

from .cohort import DAY, NOW, answers, load_cohort

pytest.importorskip("chdb", reason="chdb (the dev extra) runs ClickHouse in this process")
pytestmark = pytest.mark.databases


def counts(store: ClickHouse) -> dict[str, int]:
    return {t: store.rows(f"SELECT count() FROM {{db}}.{t} FINAL")[0][0] for t in TABLES}


def test_a_second_sync_and_an_interrupted_sync_add_nothing(app, ch_app, acme, store, monkeypatch):
    db = app.extensions["db"]
    load_cohort(app, acme, learners=20, seed=5)
    sync(db, store, batch=300)
    once = counts(store)
    assert sync(db, store)["events"] == 0  # nothing new: nothing copied
    assert counts(store) == once

    load_cohort(app, acme, learners=20, seed=6)  # more, then a sync that dies mid-batch
    real, calls = ClickHouse.insert, []

    def dies_after_the_events(self, table, columns, rows, **token):
        calls.append(table)
        if table == "learner_lessons" and calls.count("learner_lessons") == 2:
            raise AnalyticsUnavailable("connection lost")  # the batch's events (and their counts) are in
        return real(self, table, columns, rows, **token)

    monkeypatch.setattr(ClickHouse, "insert", dies_after_the_events)
    with pytest.raises(AnalyticsUnavailable):
        sync(db, store, batch=300)
    monkeypatch.setattr(ClickHouse, "insert", real)
    sync(db, store, batch=300)  # resumes from the last batch recorded: copies its events again
    sync(db, store, batch=300)
    with db.read() as session:
        assert counts(store)["events"] == session.query(Event).count()
    assert answers(ch_app, acme) == answers(app, acme)


def test_retention_takes_the_same_events_from_clickhouse_as_the_primary(app, ch_app, acme, store):
    """WORKBENCH_EVENTS_RETENTION_MONTHS: the events the primary's maintenance deletes (stored
    before the cutoff month, held by the rollups) go from ClickHouse at the next sync too; no
    learner's raw events outlive retention there, and every endpoint still answers as the
    primary does (its counts kept, as the rollups keep theirs)."""
    from sqlalchemy import update

    from service.db.analytics.rollup_refresh import refresh
    from service.db.partitions import maintain, retention_cutoff

    db = app.extensions["db"]
    learners = load_cohort(app, acme, learners=16, seed=29)
    with db.write() as session:  # half the cohort stored four months ago
        session.execute(update(Event).where(Event.learner.in_(learners[:8])).values(stored_at=NOW - 120 * DAY))
    refresh(db)
    sync(db, store)  # copied while the primary still has them
    cutoff = retention_cutoff(1, NOW)
    before = "SELECT count() FROM {db}.events FINAL WHERE stored_at < {c:DateTime64(6, 'UTC')}"
    assert store.rows(before, c=cutoff)[0][0] > 0
    maintain(db, keep_months=1, now=NOW)
    expired = sync(db, store, keep_months=1)["expired"]
    with db.read() as session:
        assert session.query(Event).filter(Event.stored_at < cutoff).count() == 0
        kept = session.query(Event).count()
    assert expired > 0 and store.rows(before, c=cutoff)[0][0] == 0
    assert counts(store)["events"] == kept > 0
    assert answers(ch_app, acme) == answers(app, acme)


def rows_of(store: ClickHouse, learner: str) -> dict[str, int]:
    """Every row of the learner any read could see (not only FINAL's)."""
    return {
        t: store.rows(f"SELECT count() FROM {{db}}.{t} WHERE learner = {{l:String}}", l=learner)[0][0] for t in TABLES
    }


def test_an_erased_learner_cannot_be_read_afterwards(app, ch_app, acme, store, monkeypatch):
    db, client = app.extensions["db"], ch_app.test_client()
    learners = load_cohort(app, acme, learners=30, seed=7)
    sync(db, store)
    # Two learners with rows in every table (progress, checks and a language too).
    first, second = [learner for learner in learners if all(rows_of(store, learner).values())][:2]
    assert client.delete(f"/api/v1/learners/{first}", headers=acme).status_code == 200
    assert not any(rows_of(store, first).values())  # hidden at once

    # ClickHouse unreachable at the erasure: the queue keeps the learner until the sync erases them.
    from service.db import clickhouse

    def unreachable(*_):
        raise AnalyticsUnavailable("connection refused")

    monkeypatch.setattr(clickhouse, "forget", unreachable)
    assert client.delete(f"/api/v1/learners/{second}", headers=acme).status_code == 200
    assert all(rows_of(store, second).values())
    assert sync(db, store)["erased"] == 2
    assert not any(rows_of(store, second).values())
    with db.read() as session:
        assert session.query(AnalyticsErasure).count() == 0  # the queue forgets them too
    export = client.get("/api/v1/analytics/events/export", headers=acme).get_data(as_text=True)
    assert first not in export and second not in export
    assert answers(ch_app, acme) == answers(app, acme)


def test_the_command_migrates_syncs_and_says_what_it_copied(app, acme, app_config, ch_url, monkeypatch):
    from click.testing import CliRunner

    from service.cli import main

    load_cohort(app, acme, learners=6, seed=19)
    monkeypatch.setenv("WORKBENCH_DATABASE_URL", app_config["database_url"])
    monkeypatch.setenv("WORKBENCH_ANALYTICS_URL", ch_url)
    first = CliRunner().invoke(main, ["analytics", "sync"])
    assert first.exit_code == 0, first.output
    with app.extensions["db"].read() as session:
        assert f"{session.query(Event).count()} events" in first.output
    again = CliRunner().invoke(main, ["analytics", "sync"])
    assert again.exit_code == 0 and "events" not in again.output  # nothing new to copy
    assert "up to date" in CliRunner().invoke(main, ["analytics", "migrate"]).output
    monkeypatch.setenv("WORKBENCH_ANALYTICS_URL", "")
    refused = CliRunner().invoke(main, ["analytics", "sync"])
    assert refused.exit_code == 1 and "WORKBENCH_ANALYTICS_URL" in refused.output


def test_a_sync_while_another_runs_is_refused_and_copies_nothing(
    app, acme, app_config, ch_url, store, monkeypatch, caplog
):
    """Two syncs side by side would read the same events under different bounds, and the view
    would count them twice: while one holds the database's sync lock, the command is refused
    saying why and a following service waits for its next pass; then the sync copies them once."""
    from click.testing import CliRunner

    from service.cli import main
    from service.db.clickhouse.sync import follow, one_sync

    db = app.extensions["db"]
    load_cohort(app, acme, learners=4, seed=23)
    monkeypatch.setenv("WORKBENCH_DATABASE_URL", app_config["database_url"])
    monkeypatch.setenv("WORKBENCH_ANALYTICS_URL", ch_url)
    with one_sync(db):  # a sync under way: the lock cannot tell this one from another process's
        refused = CliRunner().invoke(main, ["analytics", "sync"])
        follow(db, store, interval=0, passes=1)
    assert refused.exit_code == 1 and "another analytics sync is running" in refused.output, refused.output
    assert "another analytics sync is running" in caplog.text
    assert counts(store)["events"] == 0
    done = CliRunner().invoke(main, ["analytics", "sync"])
    assert done.exit_code == 0, done.output
    with db.read() as session:
        assert counts(store)["events"] == session.query(Event).count() > 0
