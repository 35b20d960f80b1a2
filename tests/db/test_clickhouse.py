"""The analytics store on ClickHouse (chDB in this process): a known cohort loaded through the API
and synced answers every analytics endpoint with the same JSON as the SQL store, with and without
dates; a second sync and a sync interrupted mid-batch add nothing; an erased learner's rows cannot
be read afterwards; a platform sees its own learners only; groups under k stay suppressed."""

import datetime as dt
import os
import uuid

import pytest

from service.app import create_app
from service.db import locales
from service.db.challenges import add_check
from service.db.clickhouse import AnalyticsUnavailable, ClickHouse
from service.db.clickhouse.schema import TABLES, migrate
from service.db.clickhouse.sync import sync
from service.db.events import record_events
from service.db.events.core import SCORE_KEYS
from service.db.platforms import authenticate
from service.db.tables import AnalyticsErasure, Event
from service.demo import cohort
from service.lessons import load_catalog

pytest.importorskip("chdb", reason="chdb (the dev extra) runs ClickHouse in this process")
pytestmark = pytest.mark.databases

LESSON = "multi-head-attention"
ITEMS = load_catalog("content/lessons")[LESSON].items
NOW = dt.datetime.now(dt.UTC).replace(microsecond=0)


@pytest.fixture(scope="session")
def chdb_dir(tmp_path_factory) -> str:
    """One directory for the whole session: chDB opens one per process."""
    return str(tmp_path_factory.mktemp("chdb"))


@pytest.fixture
def ch_url(chdb_dir) -> str:
    return f"chdb://{chdb_dir}?database=t{uuid.uuid4().hex[:12]}"


@pytest.fixture
def ch_app(app_config, ch_url):
    """The same database, analytics answered by ClickHouse."""
    app = create_app({**app_config, "analytics_url": ch_url})
    yield app
    app.extensions["db"].dispose()


@pytest.fixture
def store(ch_url) -> ClickHouse:
    store = ClickHouse(ch_url)
    migrate(store)
    return store


def as_posted(e) -> dict:
    """A demo event as a platform posts it (the server scores answers itself)."""
    data = {k: v for k, v in e.data.items() if k not in SCORE_KEYS} if e.item else e.data
    body = {
        "id": e.event_id,
        "learner": e.learner,
        "lesson": e.lesson,
        "checkpoint": e.checkpoint,
        "event": e.event,
        "data": data,
        "occurred_at": e.occurred_at.isoformat(),
    }
    if e.instance_id:
        body["instance_id"] = e.instance_id
    if e.item:
        body["item"] = e.item
    return body


def load_cohort(app, headers, learners: int, seed: int) -> list[str]:
    """The demo cohort (every checkpoint, answers, token edits, manipulations) posted through the
    API; its exercise checks and languages stored as the API stores them."""
    client, db = app.test_client(), app.extensions["db"]
    ids, events, verified = [], [], []
    platform = _platform(app, headers)
    with db.write() as session:
        for n, (learner, theirs, checks) in enumerate(cohort(learners, seed, NOW, ITEMS)):
            ids.append(learner)
            # A test result the challenge checker verified is recorded by the server, as it records it.
            verified += [e for e in theirs if "verification" in e.data]
            events += [as_posted(e) for e in theirs if "verification" not in e.data]
            for check in checks:
                mistakes = check["diagnosis"].split(",") if check["diagnosis"] else []
                add_check(
                    session, platform, learner, LESSON, {"tokens": "demo"}, check["correct"], 0.1, mistakes, check["at"]
                )
            if n % 3:
                locales.keep(session, platform, learner, ("en", "es", "zh-CN")[n % 3], NOW)
            if n % 4 == 0:
                events += odd_edits(learner, seed, n)
    for i in range(0, len(events), 400):
        response = client.post("/api/v1/events", json={"events": events[i : i + 400]}, headers=headers)
        assert response.status_code in (200, 201), str(response.get_json())[:1500]
    record_events(db, platform, verified, app.extensions["lessons"])
    return ids


ODD = [  # what a platform's own client may send: each store must count it by the same rules
    {"parameter": "causal", "token": 1, "dimension": 2},  # a cell only when the parameter is "token"
    {"parameter": "token", "token": 1.0, "dimension": 2},  # not a whole number
    {"parameter": "token", "token": 1000000, "dimension": 0},  # past the cap
    {"parameter": "token", "token": -1, "dimension": 0},
    {"parameter": "token", "token": 2, "dimension": 3, "manipulation": "m" * 129},  # a name too long: none
    {"parameter": "p" * 129},
    {"parameter": 5},
    {"parameter": "héads-ü", "manipulation": "édit-one-token"},  # characters, not bytes
]


def odd_edits(learner: str, seed: int, n: int) -> list[dict]:
    return [
        {"id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"odd/{seed}/{n}/{i}")), "learner": learner, "lesson": LESSON,
         "checkpoint": "experiment", "event": "parameter-changed", "data": data,
         "occurred_at": (NOW - dt.timedelta(days=n % 9, minutes=i)).isoformat()}
        for i, data in enumerate(ODD)
    ]  # fmt: skip


def _platform(app, headers) -> int:
    with app.extensions["db"].read() as session:
        return authenticate(session, headers["Authorization"].split()[1]).platform_id


DAY = dt.timedelta(days=1)
WINDOWS = [
    {},
    {"from": (NOW - 7 * DAY).isoformat()},
    {"to": (NOW - 3 * DAY).isoformat()},
    {"from": (NOW - 10 * DAY + dt.timedelta(hours=5, minutes=7)).isoformat(), "to": (NOW - 2 * DAY).isoformat()},
]


def answers(app, headers) -> dict:
    """Every analytics endpoint's JSON (and the export's lines) for the cohort."""
    client, found = app.test_client(), {}

    def get(path, **query):
        response = client.get(path, query_string=query, headers=headers)
        assert response.status_code == 200, (path, query, response.get_data(as_text=True)[:300])
        return response.get_json() if response.is_json else response.get_data(as_text=True)

    lesson = f"/api/v1/analytics/lessons/{LESSON}"
    for i, window in enumerate(WINDOWS):
        for what in ("funnel", "durations", "parameters", "mistakes"):
            found[(what, i)] = get(f"{lesson}/{what}", **window)
        for bucket in ("hour", "day", "week"):
            for group_by in ("event", "checkpoint"):
                found[("timeseries", bucket, group_by, i)] = get(
                    "/api/v1/analytics/events/timeseries", bucket=bucket, group_by=group_by, **window
                )
                found[("timeseries", bucket, group_by, i, "lesson")] = get(
                    "/api/v1/analytics/events/timeseries", bucket=bucket, group_by=group_by, lesson=LESSON, **window
                )
    found["items"] = get(f"{lesson}/items")
    for locale in (None, "es"):
        page, cursor = [], None
        while True:
            query = {"lesson": LESSON, "limit": 7, **({"cursor": cursor} if cursor else {})}
            body = get("/api/v1/analytics/learners", **query, **({"locale": locale} if locale else {}))
            page.append(body)
            cursor = body["next"]
            if not cursor:
                break
        found[("learners", locale)] = page
    found["export"] = get("/api/v1/analytics/events/export")
    found["export-csv"] = get("/api/v1/analytics/events/export", format="csv")
    return found


def test_every_endpoint_answers_the_same_json_from_clickhouse(app, ch_app, acme, store):
    load_cohort(app, acme, learners=60, seed=3)
    copied = sync(app.extensions["db"], store)
    with app.extensions["db"].read() as session:
        assert copied["events"] == session.query(Event).count() > 1000
    sql, clickhouse = answers(app, acme), answers(ch_app, acme)
    assert sql.keys() == clickhouse.keys()
    for key in sql:
        assert clickhouse[key] == sql[key], key
    # The cohort is large enough that the comparison is of figures, not of suppressed rows.
    assert sql[("funnel", 0)]["started"] == 60
    assert any(not row["suppressed"] for row in sql[("durations", 0)]["checkpoints"])
    assert sql[("mistakes", 0)]["mistakes"] and sql["items"]["items"]
    assert len(sql["export"].splitlines()) == copied["events"]


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


def test_a_platform_sees_its_own_learners_only(app, ch_app, acme, globex, store):
    load_cohort(app, acme, learners=15, seed=9)
    sync(app.extensions["db"], store)
    theirs = answers(ch_app, globex)
    assert theirs == answers(app, globex)
    assert theirs[("funnel", 0)]["started"] == 0 and theirs["export"] == ""


def test_groups_under_k_stay_suppressed(app_config, ch_url, acme, store):
    strict = create_app({**app_config, "k_anonymity": 50})
    strict_ch = create_app({**app_config, "k_anonymity": 50, "analytics_url": ch_url})
    load_cohort(strict, acme, learners=20, seed=13)
    sync(strict.extensions["db"], store)
    body = answers(strict_ch, acme)
    assert body == answers(strict, acme)
    assert body[("funnel", 0)]["started"] is None and body[("learners", None)][0]["suppressed"]


@pytest.mark.skipif(
    not os.environ.get("WORKBENCH_TEST_CLICKHOUSE_URL"),
    reason="no ClickHouse server: set WORKBENCH_TEST_CLICKHOUSE_URL=clickhouse://user:password@host:8123/db",
)
def test_the_same_sql_runs_on_a_clickhouse_server(app, app_config, acme):
    url = os.environ["WORKBENCH_TEST_CLICKHOUSE_URL"]
    server = ClickHouse(url)
    server.command("DROP DATABASE IF EXISTS {db}")
    migrate(server)
    load_cohort(app, acme, learners=40, seed=17)
    sync(app.extensions["db"], server)
    on_server = create_app({**app_config, "analytics_url": url})
    assert answers(on_server, acme) == answers(app, acme)


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


def test_an_analytics_url_of_another_kind_stops_start_up_without_its_password(app_config):
    from service.config import ConfigError

    with pytest.raises(ConfigError, match="WORKBENCH_ANALYTICS_URL") as refused:
        create_app({**app_config, "analytics_url": "mysql://admin:s3cret@db:3306/x"})
    assert "s3cret" not in str(refused.value)


def test_a_store_out_of_reach_is_a_503_that_names_no_host(app_config, acme):
    """Every analytics read (and the export) answers 503 problem+json saying to try again; the
    driver's words (host, port, SQL) stay in the log."""
    down = create_app({**app_config, "analytics_url": "clickhouse://reader:hunter2@127.0.0.1:1/analytics"})
    client = down.test_client()
    for path in (f"/api/v1/analytics/lessons/{LESSON}/funnel", f"/api/v1/analytics/lessons/{LESSON}/items",
                 "/api/v1/analytics/events/timeseries", "/api/v1/analytics/events/export"):  # fmt: skip
        response = client.get(path, headers=acme)
        assert response.status_code == 503, (path, response.status_code)
        assert response.mimetype == "application/problem+json" and response.headers["Retry-After"]
        said = response.get_data(as_text=True)
        assert "127.0.0.1" not in said and "hunter2" not in said and "SELECT" not in said
