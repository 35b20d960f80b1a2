"""Storage quotas (issue 40): a learner, a browser session and a platform each store at most so
many events, and so many bytes of them, per period; past one, 429 naming the quota with
Retry-After (413 when one request alone is larger), nothing of the refused request stored, and
the operator sees it in the metrics. The counts are checked against the events table itself."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from sqlalchemy import text

from service.app import create_app
from service.config import ConfigError, Settings
from service.db import quotas

from .helpers import event

pytestmark = pytest.mark.databases

EVENTS = "/api/v1/events"


@pytest.fixture
def quota_app(app_config):
    def make(**limits):
        settings = {f"quota_{k}": v for k, v in limits.items()}
        app = create_app({**app_config, **settings})
        made.append(app)
        return app

    made: list = []
    yield make
    for app in made:
        app.extensions["db"].dispose()


def key_for(app, platform="acme"):
    from service.db.platforms import create_key

    with app.extensions["db"].write() as session:
        key, _ = create_key(session, platform, frozenset({"events:write", "progress:read"}))
    return {"Authorization": f"Bearer {key.token}"}


def stored(app, learner=None) -> tuple[int, int]:
    """(events, bytes) as the events table holds them, measured independently of the quota code:
    the JSON of each stored event's data, its text fields, and the per-row share the quotas use."""
    sql = "SELECT learner, lesson, checkpoint, event, instance_id, data FROM events"
    with app.extensions["db"].read() as session:
        rows = session.execute(text(sql)).all()
    rows = [r for r in rows if learner is None or r[0] == learner]
    total = 0
    for r in rows:
        data = r[5] if isinstance(r[5], dict) else json.loads(r[5])
        body = json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()
        total += quotas.ROW_BYTES + len(body) + sum(len((t or "").encode()) for t in r[:5])
    return len(rows), total


def usage(app, subject) -> tuple[int, int]:
    with app.extensions["db"].read() as session:
        row = session.execute(
            text("SELECT sum(events), sum(bytes) FROM storage_usage WHERE subject = :s"), {"s": subject}
        ).one()
    return int(row[0] or 0), int(row[1] or 0)


def assert_quota_problem(answer, status, quota):
    assert answer.status_code == status, answer.get_json()
    assert answer.mimetype == "application/problem+json"
    body = answer.get_json()
    assert body["type"].endswith("/storage-quota") and body["quota"] == quota
    assert quota in body["detail"]
    if status == 429:
        assert int(answer.headers["Retry-After"]) >= 1
    return body


def test_a_learner_past_their_events_quota_gets_429_and_nothing_more_is_stored(quota_app):
    app = quota_app(learner_events="10/day")
    client, headers = app.test_client(), key_for(app)
    assert client.post(EVENTS, json={"events": [event("ada") for _ in range(8)]}, headers=headers).status_code == 201
    over = client.post(EVENTS, json={"events": [event("ada") for _ in range(3)]}, headers=headers)
    body = assert_quota_problem(over, 429, "learner events")
    assert body["limit"] == 10 and body["used"] == 8 and body["requested"] == 3
    assert stored(app, "ada")[0] == 8  # the refused batch stored nothing
    assert client.post(EVENTS, json={"events": [event("ada"), event("ada")]}, headers=headers).status_code == 201
    assert client.post(EVENTS, json=event("bea"), headers=headers).status_code == 201  # another learner writes on
    assert stored(app, "ada")[0] == 10


def test_a_request_larger_than_a_quota_on_its_own_is_413(quota_app):
    app = quota_app(learner_bytes="2000/day")
    client, headers = app.test_client(), key_for(app)
    big = event("ada", data={"note": "x" * 4000})
    assert_quota_problem(client.post(EVENTS, json=big, headers=headers), 413, "learner bytes")
    assert stored(app) == (0, 0)


def test_the_counts_are_what_the_events_table_holds_and_replays_are_not_counted(quota_app):
    app = quota_app()
    client, headers = app.test_client(), key_for(app)
    batch = [event("ada", data={"note": "é" * n}) for n in range(1, 40)] + [event("bea")]
    assert client.post(EVENTS, json={"events": batch}, headers=headers).status_code == 201
    assert client.post(EVENTS, json={"events": batch}, headers=headers).status_code == 200  # a replay
    with app.extensions["db"].read() as session:
        platform = session.execute(text("SELECT id FROM platforms WHERE name = 'acme'")).scalar_one()
    assert usage(app, quotas.learner_subject(platform, "ada")) == stored(app, "ada")
    assert usage(app, f"platform:{platform}") == stored(app)


def test_a_platform_past_its_quota_refuses_every_learner_and_no_other_platform(quota_app):
    app = quota_app(platform_events="6/day")
    client, acme, globex = app.test_client(), key_for(app, "acme"), key_for(app, "globex")
    for learner in ("a", "b", "c"):
        assert client.post(EVENTS, json={"events": [event(learner), event(learner)]}, headers=acme).status_code == 201
    assert_quota_problem(client.post(EVENTS, json=event("d"), headers=acme), 429, "platform events")
    assert client.post(EVENTS, json=event("d"), headers=globex).status_code == 201


def test_one_anonymous_browser_session_cannot_flood_the_disk(quota_app):
    """The finding: one anonymous session stored about 100 MB in 4 s. Now it stops at its quota."""
    app = quota_app(session_bytes="200000/hour")
    client = app.test_client()
    assert client.post("/api/v1/session").status_code in (200, 201)

    def batch():
        events = [event(data={"note": "x" * 3500}) for _ in range(10)]
        return {"events": [{k: v for k, v in e.items() if k != "learner"} for e in events]}  # the session's own

    statuses = [client.post(EVENTS, json=batch()).status_code for _ in range(10)]
    assert statuses[:2] == [201, 201] and statuses[-1] == 429
    assert stored(app)[1] <= 200_000
    over = client.post(EVENTS, json=batch())
    assert_quota_problem(over, 429, "session bytes")


def session_from(app, address: str):
    """A test client that is a new browser session from `address`."""
    client = app.test_client()
    client.environ_base["REMOTE_ADDR"] = address
    assert client.post("/api/v1/session").status_code in (200, 201)
    return client


def own(*events):
    return {"events": [{k: v for k, v in e.items() if k != "learner"} for e in events]}  # the session's own learner


def test_sessions_started_from_one_network_cannot_refuse_another_learners_events(quota_app):
    """The finding: browser sessions are free to start, each with its own session quota, and all of
    them counted against the web platform's one daily quota, so a few addresses filled it and every
    browser learner was refused until midnight UTC. Now the sessions of one network share a quota
    of their own, and the web platform's is an alarm in the metrics, never a refusal."""
    from prometheus_client import REGISTRY

    app = quota_app(platform_events="30/day", network_events="20/day", session_events="1000/hour")
    before = REGISTRY.get_sample_value("workbench_quota_alarms_total", {"quota": "platform events"}) or 0
    refused = []
    for net in ("203.0.113", "198.51.100", "192.0.2"):  # three networks, ten sessions each
        for k in range(10):
            answer = session_from(app, f"{net}.{k + 1}").post(EVENTS, json=own(event(), event(), event()))
            refused.append(answer.status_code == 429)
    assert refused.count(False) == 18  # six sessions of three events fit each network's twenty
    learner = session_from(app, "100.64.0.9")  # another network, after the web platform's 30 are long passed
    assert learner.post(EVENTS, json=own(event(), event())).status_code == 201
    over = session_from(app, "203.0.113.77").post(EVENTS, json=own(event(), event(), event()))  # 18 + 3 > 20
    assert_quota_problem(over, 429, "network events")
    after = REGISTRY.get_sample_value("workbench_quota_alarms_total", {"quota": "platform events"}) or 0
    assert after > before  # the operator is told the web platform went past its figure


def test_a_browser_sessions_batches_and_data_are_far_smaller_than_a_platforms(quota_app):
    app = quota_app()
    browser, acme = session_from(app, "203.0.113.5"), key_for(app)
    big_batch = own(*(event() for _ in range(51)))
    refused = browser.post(EVENTS, json=big_batch)
    assert refused.status_code == 413 and "at most 50 events" in refused.json["detail"]
    big_data = browser.post(EVENTS, json=own(event(data={"note": "x" * 5000})))
    assert big_data.status_code == 413 and big_data.json["errors"] == {
        "events.0.data": ["at most 4096 bytes of JSON from a browser session"]
    }
    assert browser.post(EVENTS, json=own(*(event() for _ in range(50)))).status_code == 201
    batch = {"events": [event("ada", data={"note": "x" * 5000}) for _ in range(51)]}
    assert (
        app.test_client().post(EVENTS, json=batch, headers=acme).status_code == 201
    )  # a platform's key: its own limits


def test_a_new_period_has_room_again(quota_app, monkeypatch):
    app = quota_app(learner_events="2/hour")
    client, headers = app.test_client(), key_for(app)
    now = [1_800_000_000.0 + 3599]  # the last second of an hour
    monkeypatch.setattr("service.api.storage.time.time", lambda: now[0])
    monkeypatch.setattr("service.db.events.time.time", lambda: now[0])
    assert client.post(EVENTS, json={"events": [event("ada"), event("ada")]}, headers=headers).status_code == 201
    over = client.post(EVENTS, json=event("ada"), headers=headers)
    assert over.status_code == 429 and over.headers["Retry-After"] == "1"
    now[0] += 1  # the next hour
    assert client.post(EVENTS, json=event("ada"), headers=headers).status_code == 201


def test_exercise_checks_count_against_the_bytes_quota(quota_app):
    app = quota_app(learner_bytes="3000/day")
    client, headers = app.test_client(), key_for(app)
    case = {"tokens": [[float(i), 1.0, 0.5, -0.5] for i in range(30)], "heads": 2, "causal": True}
    body = {"learner": "ada", "case": case, "output": {"concatenated": [[0.0] * 4] * 30}}
    answers = [
        client.post("/api/v1/exercises/multi-head-attention/check", json=body, headers=headers) for _ in range(4)
    ]
    assert answers[0].status_code == 200 and answers[0].get_json()["recorded"]
    assert_quota_problem(answers[-1], 429, "learner bytes")


def test_erasing_a_learner_leaves_no_usage_row_naming_them(quota_app):
    app = quota_app()
    client, headers = app.test_client(), key_for(app)
    client.post(EVENTS, json=event("ada"), headers=headers)
    with app.extensions["db"].read() as session:
        platform = session.execute(text("SELECT id FROM platforms WHERE name = 'acme'")).scalar_one()
    assert usage(app, quotas.learner_subject(platform, "ada"))[0] == 1
    assert client.delete("/api/v1/learners/ada", headers=headers).status_code == 200
    assert usage(app, quotas.learner_subject(platform, "ada")) == (0, 0)


def test_the_operator_sees_the_quotas_and_their_refusals_in_the_metrics(quota_app):
    app = quota_app(learner_events="1/day")
    client, headers = app.test_client(), key_for(app)
    client.post(EVENTS, json=event("ada"), headers=headers)
    client.post(EVENTS, json=event("ada"), headers=headers)
    metrics = client.get("/metrics").data.decode()
    assert 'workbench_quota_limit{period_seconds="86400",quota="learner events"} 1.0' in metrics
    assert 'workbench_quota_fullest_ratio{quota="learner events"} 1.0' in metrics
    refused = [
        line
        for line in metrics.splitlines()
        if line.startswith('workbench_quota_refusals_total{quota="learner events"}')
    ]
    assert refused and float(refused[0].split()[-1]) >= 1


def test_ended_windows_are_deleted_by_maintenance(quota_app):
    from service.db.partitions import maintain

    app = quota_app()
    client, headers = app.test_client(), key_for(app)
    client.post(EVENTS, json=event("ada"), headers=headers)
    done = maintain(app.extensions["db"], now=dt.datetime.now(dt.UTC) + dt.timedelta(days=2))
    assert done.usage_windows == 2  # the learner's day and the platform's
    with app.extensions["db"].read() as session:
        assert session.execute(text("SELECT count(*) FROM storage_usage")).scalar_one() == 0


@pytest.mark.parametrize("value", ["lots", "0/day", "5/fortnight"])
def test_a_quota_that_does_not_read_as_amount_per_period_stops_the_start(value):
    with pytest.raises(ConfigError, match="WORKBENCH_QUOTA_LEARNER_EVENTS"):
        Settings.load({"quota_learner_events": value})


def test_an_empty_quota_is_off():
    assert [q.name for q in quotas.configured(Settings.load({"quota_learner_events": ""}))].count("learner events") == 0


def test_a_learner_far_from_a_quota_costs_no_read_and_one_near_it_reads_every_time(quota_app, monkeypatch):
    """The check reads what a subject used unless this process knows it is under half of every
    quota (and read it in the last READ_EVERY seconds): the common write costs no extra query,
    and near a quota every write reads, so the refusal stays exact."""
    app = quota_app(learner_events="20/day")
    client, headers = app.test_client(), key_for(app)
    reads = []
    real = quotas.check
    monkeypatch.setattr(quotas, "check", lambda *a, **k: reads.append(1) or real(*a, **k))
    statuses = [client.post(EVENTS, json=event("ada"), headers=headers).status_code for _ in range(22)]
    assert statuses == [201] * 20 + [429, 429]  # exact, whatever was skipped
    assert 10 <= len(reads) < 22  # the first read, none while under half, then every time past it
    clock = [dt.datetime.now(dt.UTC).timestamp()]
    monkeypatch.setattr("service.api.storage.time.time", lambda: clock[0])
    reads.clear()
    client.post(EVENTS, json=event("bea"), headers=headers)
    client.post(EVENTS, json=event("bea"), headers=headers)
    assert len(reads) == 1  # known far from the quota: the second write reads nothing
    clock[0] += quotas.READ_EVERY + 1
    client.post(EVENTS, json=event("bea"), headers=headers)
    assert len(reads) == 2  # trusted for READ_EVERY seconds only
