"""xAPI: statement shape (validated by Ralph's models), the statements resource, and forwarding
to a real LRS (Ralph, started here) in batches, surviving a re-send."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from service.db.tables import XapiForwarding
from service.xapi.forward import backlog, configure, forward_once

from .api.helpers import EXPLANATION, LESSON, answered, event
from .live import free_port

X = {"X-Experience-API-Version": "1.0.3"}
RALPH = Path(sys.executable).with_name("ralph")


def completed(learner, checkpoint, data):
    return event(learner, checkpoint=checkpoint, event="completed", instance_id=None, data=data)


@pytest.fixture
def stored(client, acme):
    events = [
        completed("ada", "predict", {"text": "two wide"}),
        event("ada"),
        event(
            "ada",
            checkpoint="implement",
            event="attempted",
            instance_id=None,
            data={"tests": {"passed": 3, "failed": 2}},
        ),
        completed("ada", "implement", {"tests": {"passed": 5, "failed": 0}}),
        completed("ada", "explain", {"text": EXPLANATION}),
        event("bob", checkpoint=None, event="started", instance_id=None, data={}),
    ]
    assert client.post("/api/v1/events", json={"events": events}, headers=acme).status_code == 201
    return events


@pytest.fixture
def analyst(make_key):
    return make_key("acme", "analytics:read")


def statements(client, headers, query=""):
    response = client.get(f"/api/v1/xapi/statements{query}", headers={**headers, **X})
    assert response.status_code == 200, response.json
    assert response.headers["X-Experience-API-Version"] == "1.0.3"
    assert response.headers["X-Experience-API-Consistent-Through"]
    return response.json


@pytest.mark.databases
def test_statements_map_events_with_adl_verbs(client, stored, analyst):
    body = statements(client, analyst, "?ascending=true")
    by_id = {s["id"]: s for s in body["statements"]}
    assert set(by_id) == {e["id"] for e in stored}
    verbs = {e["id"]: by_id[e["id"]]["verb"]["id"].rsplit("/", 1)[1] for e in stored}
    assert [verbs[e["id"]] for e in stored] == ["answered", "interacted", "failed", "passed", "responded", "attempted"]
    predict = by_id[stored[0]["id"]]
    assert predict["actor"]["account"]["name"] == "ada"
    assert predict["actor"]["account"]["homePage"].startswith("https://")
    assert predict["object"]["id"].endswith(f"/lessons/{LESSON}/checkpoints/predict")
    assert predict["context"]["contextActivities"]["parent"][0]["id"].endswith(f"/lessons/{LESSON}")
    assert predict["result"]["response"] == "two wide"
    assert dt.datetime.strptime(predict["timestamp"], "%Y-%m-%dT%H:%M:%S.%fZ")  # UTC, milliseconds
    assert len(predict["timestamp"].split(".")[1]) == 4  # "123Z"
    passed = by_id[stored[3]["id"]]
    assert passed["result"]["success"] is True and passed["result"]["score"]["scaled"] == 1.0


@pytest.mark.databases
def test_names_and_verbs_are_language_maps_in_every_language_the_lesson_is_written_in(client, stored, analyst):
    by_id = {s["id"]: s for s in statements(client, analyst)["statements"]}
    predict = by_id[stored[0]["id"]]
    assert predict["object"]["definition"]["name"] == {  # the lesson's own titles for the checkpoint
        "en-US": "Record your prediction",
        "es": "Anota tu predicción",
        "zh-CN": "写下你的预测",
    }
    assert (
        set(predict["verb"]["display"]) == {"en-US", "es", "zh-CN"}
        and predict["verb"]["display"]["en-US"] == "answered"
    )
    assert all(set(s["verb"]["display"]) == {"en-US", "es", "zh-CN"} for s in by_id.values())


def test_statements_validate_against_ralphs_xapi_model(client, stored, analyst):
    models = pytest.importorskip(
        "ralph.models.xapi.base.statements", reason="Ralph (ralph-malph) is installed by .ci/run"
    )
    for statement in statements(client, analyst)["statements"]:
        models.BaseXapiStatement(**statement)


@pytest.mark.databases
def test_filters_limit_and_more(client, stored, analyst):
    agent = statements(client, analyst)["statements"][0]["actor"]
    import json

    bob = {"account": {**agent["account"], "name": "bob"}}
    only_bob = statements(client, analyst, "?agent=" + requests.utils.quote(json.dumps(bob)))["statements"]
    assert [s["actor"]["account"]["name"] for s in only_bob] == ["bob"]
    passed = statements(client, analyst, "?verb=http://adlnet.gov/expapi/verbs/passed")["statements"]
    assert len(passed) == 1
    activity = passed[0]["object"]["id"]
    assert len(statements(client, analyst, f"?activity={activity}")["statements"]) == 2  # attempted + passed
    first = statements(client, analyst, "?limit=4&ascending=true")
    assert len(first["statements"]) == 4 and first["more"]
    rest = client.get(first["more"], headers={**analyst, **X}).json
    assert len(rest["statements"]) == 2 and rest["more"] == ""
    ids = [s["id"] for s in first["statements"] + rest["statements"]]
    assert len(set(ids)) == 6


@pytest.fixture
def answers(client, acme):
    events = [answered("head-shapes", "full-width", "post", "ada"), answered("head-width", 2, "pre", "ada")]
    skip = {**answered("scale", None, "pre", "ada"), "event": "skipped", "data": {"phase": "pre"}}
    assert client.post("/api/v1/events", json={"events": [*events, skip]}, headers=acme).status_code == 201
    return [*events, skip]


@pytest.mark.databases
def test_answers_are_answered_statements_about_cmi_interactions(client, answers, analyst):
    by_id = {s["id"]: s for s in statements(client, analyst)["statements"]}
    choice, number = by_id[answers[0]["id"]], by_id[answers[1]["id"]]
    assert choice["verb"]["id"] == "http://adlnet.gov/expapi/verbs/answered"
    assert choice["object"]["id"].endswith(f"/lessons/{LESSON}/items/head-shapes")
    definition = choice["object"]["definition"]
    assert definition["type"] == "http://adlnet.gov/expapi/activities/cmi.interaction"
    assert definition["interactionType"] == "choice" and definition["correctResponsesPattern"] == ["right"]
    assert [c["id"] for c in definition["choices"]] == ["right", "full-width", "feature-weights", "swapped"]
    assert set(definition["choices"][1]["description"]) == {"en-US", "es", "zh-CN"}
    assert set(definition["name"]) == {"en-US", "es", "zh-CN"}
    assert choice["result"]["response"] == "full-width" and choice["result"]["success"] is False
    extensions = choice["result"]["extensions"]
    said = {k.rsplit("/", 1)[1]: v for k, v in extensions.items()}
    assert said["misconception"] == "Each head works on the whole model width" and said["phase"] == "post"
    assert choice["context"]["contextActivities"]["parent"][0]["id"].endswith(f"/lessons/{LESSON}")
    assert number["object"]["definition"]["interactionType"] == "numeric"
    assert number["object"]["definition"]["correctResponsesPattern"] == ["2"]
    assert number["result"] == {**number["result"], "response": "2", "success": True}
    skipped = by_id[answers[2]["id"]]  # a question before the workbench passed over: no response, no score
    assert skipped["verb"]["id"] == "http://id.tincanapi.com/verb/skipped" and "response" not in skipped["result"]
    assert skipped["object"]["id"].endswith(f"/lessons/{LESSON}/items/scale")


def test_answered_statements_validate_against_ralphs_models(client, answers, analyst):
    models = pytest.importorskip(
        "ralph.models.xapi.base.statements", reason="Ralph (ralph-malph) is installed by .ci/run"
    )
    interaction = pytest.importorskip("ralph.models.xapi.base.unnested_objects")
    for statement in statements(client, analyst)["statements"]:
        models.BaseXapiStatement(**statement)
        interaction.BaseXapiActivityInteractionDefinition(**statement["object"]["definition"])


def test_the_export_carries_the_answers(client, answers, analyst):
    lines = client.get("/api/v1/analytics/events/export", headers=analyst).data.splitlines()
    import json

    exported = {r["id"]: r for r in map(json.loads, lines)}
    row = exported[answers[0]["id"]]
    assert row["item"] == "head-shapes" and row["event"] == "answered"
    assert row["data"]["correct"] is False and row["data"]["response"] == "full-width"
    csv_header = client.get("/api/v1/analytics/events/export?format=csv", headers=analyst).data.splitlines()[0]
    assert b",item," in csv_header


def test_the_version_header_is_required_and_basic_auth_works(client, stored, analyst):
    assert client.get("/api/v1/xapi/statements", headers=analyst).status_code == 400
    import base64

    token = analyst["Authorization"].split()[1]
    basic = {"Authorization": "Basic " + base64.b64encode(f"acme:{token}".encode()).decode()}
    assert client.get("/api/v1/xapi/statements", headers={**basic, **X}).status_code == 200
    wrong = {"Authorization": "Basic " + base64.b64encode(b"acme:wb_nope").decode()}
    assert client.get("/api/v1/xapi/statements", headers={**wrong, **X}).status_code == 401
    about = client.get("/api/v1/xapi/about")
    assert about.json["version"] == ["1.0.3"]


# -- forwarding to a real LRS -----------------------------------------------------------------


@pytest.fixture
def ralph(tmp_path):
    if not RALPH.exists():
        pytest.skip("forwarding tests need Ralph (pip install 'ralph-malph[cli,lrs]'; .ci/run installs it)")
    env = {
        **os.environ,
        "RALPH_AUTH_FILE": str(tmp_path / "auth.json"),
        "RALPH_RUNSERVER_BACKEND": "fs",
        "RALPH_BACKENDS__DATA__FS__DEFAULT_DIRECTORY_PATH": str(tmp_path / "lrs"),
    }
    subprocess.run(
        [str(RALPH), "auth", "-u", "lrs", "-p", "secret", "-s", "all", "-M", "mailto:lrs@example.org", "-w"],
        env=env,
        check=True,
        capture_output=True,
        cwd=tmp_path,
    )
    port = free_port()
    launcher = Path(__file__).resolve().parent / "support" / "ralph_lrs.py"
    proc = subprocess.Popen(
        [sys.executable, str(launcher), str(port), str(tmp_path / "lrs")],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/xAPI/"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            requests.get(url + "statements", auth=("lrs", "secret"), headers=X, timeout=1)
            break
        except requests.RequestException:
            time.sleep(0.2)
    yield url
    proc.terminate()
    proc.wait(timeout=10)
    shutil.rmtree(tmp_path / "lrs", ignore_errors=True)


def lrs_ids(url):
    ids, more = [], "statements?limit=500"
    base = url.split("/xAPI/")[0]
    while more:
        body = requests.get(
            base + more if more.startswith("/") else url + more, auth=("lrs", "secret"), headers=X, timeout=10
        ).json()
        ids += [s["id"] for s in body["statements"]]
        more = body.get("more") or ""
    return ids


def test_forwarding_sends_every_statement_once_and_survives_a_re_send(app, client, acme, ralph):
    db, lessons = app.extensions["db"], app.extensions["lessons"]
    sent = [event(f"learner-{i % 7}") for i in range(23)]
    client.post("/api/v1/events", json={"events": sent}, headers=acme)
    configure(db, "acme", ralph, "lrs", "secret")
    assert backlog(db) == {"acme": 23}
    report = forward_once(db, lessons, "https://attention-workbench.example/xapi", batch=10, settle_seconds=0)
    assert report["acme"] == {"sent": 23, "error": None}
    assert sorted(lrs_ids(ralph)) == sorted(e["id"] for e in sent)
    assert backlog(db) == {"acme": 0}
    # A crash after sending but before the cursor was saved: everything is sent again.
    with db.write() as session:
        session.get(XapiForwarding, session.query(XapiForwarding).one().platform_id).last_event_row = 0
    again = forward_once(db, lessons, "https://attention-workbench.example/xapi", batch=10, settle_seconds=0)
    assert again["acme"]["error"] is None
    assert sorted(lrs_ids(ralph)) == sorted(e["id"] for e in sent)  # no duplicates in the LRS


def test_an_unreachable_lrs_backs_off_and_keeps_the_cursor(app, client, acme):
    db, lessons = app.extensions["db"], app.extensions["lessons"]
    client.post("/api/v1/events", json=event(), headers=acme)
    configure(db, "acme", f"http://127.0.0.1:{free_port()}/xAPI/", "lrs", "secret")
    report = forward_once(db, lessons, "https://x.example/xapi", settle_seconds=0, timeout=2)
    assert report["acme"]["sent"] == 0 and "ConnectionError" in report["acme"]["error"]
    with db.read() as session:
        row = session.query(XapiForwarding).one()
    assert row.last_event_row == 0 and row.failures == 1 and row.next_attempt_at is not None
    waiting = forward_once(db, lessons, "https://x.example/xapi", settle_seconds=0)
    assert "waiting_until" in waiting["acme"]  # backing off: not retried at once


def test_a_forged_more_cursor_is_400(client, analyst):
    response = client.get("/api/v1/xapi/statements?cursor=bm9wZQ", headers={**analyst, **X})
    assert response.status_code == 400 and response.mimetype == "application/problem+json"


VERIFICATION = "https://attention-workbench.example/xapi/extensions/verification"


@pytest.mark.databases
def test_statements_tell_verified_results_from_reported_ones(client, acme, analyst):
    from .api.test_challenges import reference_answers

    reported = completed("ada", "implement", {"tests": {"passed": 5, "failed": 0}})
    assert client.post("/api/v1/events", json=reported, headers=acme).status_code == 201
    challenge = client.post(
        "/api/v1/exercises/multi-head-attention/challenges", json={"learner": "bea"}, headers=acme
    ).json
    verdict = client.post(challenge["answers_url"], json={"answers": reference_answers(challenge["cases"])}).json
    assert verdict["correct"]
    body = statements(client, analyst, "?ascending=true")
    by_learner = {s["actor"]["account"]["name"]: s for s in body["statements"]}
    assert by_learner["ada"]["result"]["extensions"][VERIFICATION] == "reported"
    verified = by_learner["bea"]
    assert verified["verb"]["id"].endswith("/passed")
    assert verified["result"]["extensions"][VERIFICATION] == "verified"
    assert verified["result"]["success"] is True and verified["result"]["completion"] is True
    models = pytest.importorskip(
        "ralph.models.xapi.base.statements", reason="Ralph (ralph-malph) is installed by .ci/run"
    )
    models.BaseXapiStatement(**verified)


def test_a_statements_language_is_the_one_its_learner_reads_in(client, db, stored, analyst):
    """context.language: the learner's language where the service knows it (en-US otherwise, as
    before), and the statement still validates with it."""
    from service.db import locales
    from service.db.platforms import ensure_platform

    with db.write() as session:
        locales.keep(session, ensure_platform(session, "acme").id, "ada", "zh-CN", dt.datetime.now(dt.UTC))
    said = {s["actor"]["account"]["name"]: s["context"]["language"] for s in statements(client, analyst)["statements"]}
    assert said == {"ada": "zh-CN", "bob": "en-US"}
    models = pytest.importorskip(
        "ralph.models.xapi.base.statements", reason="Ralph (ralph-malph) is installed by .ci/run"
    )
    for statement in statements(client, analyst)["statements"]:
        models.BaseXapiStatement(**statement)
