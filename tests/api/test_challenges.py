"""The implement checkpoint is earned: fresh random cases, answered by the learner's own code,
checked by the server. Correct answers come from the pure-Python loop (tests/compute/plain_python.py);
wrong ones from a hand-written implementation making each classic slip."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import select, update

from service.cli.exercise import script
from service.db.tables import CheckpointProgress, Event, ExerciseChallenge, ExerciseCheck

from ..compute.plain_python import reference_mha
from ..exercise.slips import HANDWRITTEN_SLIPS
from .helpers import LESSON, completed, event

CHALLENGES = "/api/v1/exercises/multi-head-attention/challenges"
ROOT = Path(__file__).resolve().parents[2]
HANDWRITTEN = ROOT / "tests" / "exercise" / "implementations" / "handwritten.py"
SLIPS = HANDWRITTEN_SLIPS


def reference_answers(cases):
    answers = []
    for case in cases:
        r = reference_mha(case["tokens"], case["heads"], causal=case["causal"], w_o=case.get("output_projection"))
        answers.append(
            {
                "weights": r["weights"],
                "head_outputs": r["head_outputs"],
                "concatenated": r["concat"],
                "output": r["output"],
            }
        )
    return answers


def handwritten_answers(cases, mistake, monkeypatch):
    monkeypatch.setenv("MHA_MISTAKE", mistake)
    submit = script("submit")
    return submit.answers_for(script("learner").load(HANDWRITTEN), cases)


def implement(client, learner, headers=None):
    response = client.get(f"/api/v1/learners/{learner}/progress?lesson={LESSON}", headers=headers or {})
    if response.status_code == 404:  # nothing stored about this learner yet
        return {"completed": False}
    progress = response.json
    return next(c for c in progress["lessons"][0]["checkpoints"] if c["id"] == "implement")


@pytest.fixture
def browser(client):
    learner = client.post("/api/v1/session").json["learner"]
    return learner


@pytest.mark.databases
def test_a_browser_learner_solves_a_fresh_challenge_and_completes_implement(client, db, browser):
    challenge = client.post(CHALLENGES, json={})
    assert challenge.status_code == 201, challenge.json
    body = challenge.json
    assert body["status"] == "open" and len(body["cases"]) == 3 and len(body["id"]) == 32
    assert body["answers_url"].endswith(f"/challenges/{body['id']}/answers")
    assert not implement(client, browser)["completed"]

    result = client.post(body["answers_url"], json={"answers": reference_answers(body["cases"])})
    assert result.status_code == 200, result.json
    assert result.json["correct"] is True and result.json["completed"] is True
    assert implement(client, browser)["completed"]
    assert client.get(f"{CHALLENGES}/{body['id']}").json["status"] == "solved"
    with db.read() as s:
        progress = s.scalars(select(CheckpointProgress).where(CheckpointProgress.checkpoint == "implement")).one()
        checks = s.scalars(select(ExerciseCheck)).all()
    assert progress.verification == "verified"
    assert len(checks) == 3 and all(c.correct for c in checks)
    events = client.get(f"/api/v1/learners/{browser}/events").json["events"]
    assert [(e["event"], e["data"]["verification"]) for e in events] == [("completed", "verified")]


def test_two_challenges_have_different_cases(client, browser):
    first, second = (client.post(CHALLENGES, json={}).json for _ in range(2))
    assert first["id"] != second["id"] and first["cases"] != second["cases"]


@pytest.mark.parametrize("mistake", SLIPS)
def test_each_slip_is_rejected_with_a_message_that_names_it(client, browser, monkeypatch, mistake):
    body = client.post(CHALLENGES, json={}).json
    result = client.post(
        body["answers_url"], json={"answers": handwritten_answers(body["cases"], mistake, monkeypatch)}
    )
    assert result.status_code == 200, result.json
    verdict = result.json
    assert verdict["correct"] is False and verdict["completed"] is False
    assert mistake in verdict["mistakes"], verdict
    assert verdict["message"].startswith("Case ")
    assert not implement(client, browser)["completed"]
    assert client.get(f"{CHALLENGES}/{body['id']}").json["status"] == "open"  # try again after fixing it
    events = client.get(f"/api/v1/learners/{browser}/events").json["events"]
    assert [(e["event"], mistake in e["data"]["mistakes"]) for e in events] == [("attempted", True)]


def test_a_browser_session_cannot_complete_implement_by_reporting_counts(client, browser):
    response = client.post("/api/v1/events", json=completed("implement", learner=browser))
    assert response.status_code == 422
    assert "challenge" in response.json["errors"]["event"][0]
    assert not implement(client, browser)["completed"]
    attempt = client.post(
        "/api/v1/events",
        json=event(
            browser,
            checkpoint="implement",
            event="attempted",
            instance_id=None,
            data={"tests": {"passed": 3, "failed": 0}},
        ),
    )
    assert attempt.status_code == 201


@pytest.mark.parametrize("key", ["verification", "challenge"])
def test_no_client_may_claim_a_verified_result(client, acme, key):
    forged = completed("implement", learner="ada")
    forged["data"][key] = "verified"
    response = client.post("/api/v1/events", json=forged, headers=acme)
    assert response.status_code == 422 and "server" in response.json["errors"]["data"][0]


@pytest.mark.databases
def test_a_platform_may_still_report_its_own_autograder_and_it_is_marked_reported(client, db, acme):
    assert client.post("/api/v1/events", json=completed("implement", learner="ada"), headers=acme).status_code == 201
    assert implement(client, "ada", acme)["completed"]
    with db.read() as s:
        assert s.scalars(select(CheckpointProgress.verification)).one() == "reported"


def test_a_platform_issues_challenges_for_its_own_learners(client, acme, globex):
    assert client.post(CHALLENGES, json={}, headers=acme).status_code == 422  # whose?
    body = client.post(CHALLENGES, json={"learner": "ada"}, headers=acme).json
    assert client.get(f"{CHALLENGES}/{body['id']}", headers=globex).status_code == 404
    assert client.post(body["answers_url"], json={"answers": reference_answers(body["cases"])}, headers=acme).json[
        "completed"
    ]
    assert implement(client, "ada", acme)["completed"]


def test_another_browser_learner_cannot_see_the_challenge(app, client, browser):
    body = client.post(CHALLENGES, json={}).json
    other = app.test_client()
    other.post("/api/v1/session")
    assert other.get(f"{CHALLENGES}/{body['id']}").status_code == 404
    assert app.test_client().get(f"{CHALLENGES}/{body['id']}").status_code == 200  # the id alone: the terminal


def test_a_solved_challenge_cannot_be_answered_again(client, browser):
    body = client.post(CHALLENGES, json={}).json
    answers = {"answers": reference_answers(body["cases"])}
    assert client.post(body["answers_url"], json=answers).status_code == 200
    again = client.post(body["answers_url"], json=answers)
    assert again.status_code == 409 and again.content_type == "application/problem+json"


def test_an_expired_challenge_is_410(client, db, browser):
    body = client.post(CHALLENGES, json={}).json
    with db.write() as s:
        s.execute(update(ExerciseChallenge).values(expires_at=dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1)))
    response = client.post(body["answers_url"], json={"answers": reference_answers(body["cases"])})
    assert response.status_code == 410 and "expired" in response.json["detail"]
    assert not implement(client, browser)["completed"]


@pytest.mark.parametrize(
    "mangle, field",
    [
        (lambda a: a[:2], "answers"),
        (lambda a: [{**a[0], "weights": [[[1.0]]]}, *a[1:]], "answers.0.weights"),
        (lambda a: [{**a[0], "weights": "lots"}, *a[1:]], "answers.0.weights"),
        (lambda a: [{**a[0], "output": [[1.0, True]]}, *a[1:]], "answers.0.output"),
        (lambda a: [{k: v for k, v in a[0].items() if k != "output"}, *a[1:]], "answers.0.output"),
        (lambda a: [{**a[0], "concatenated": [[1.0, 2.0], [3.0]]}, *a[1:]], "answers.0.concatenated"),
    ],
)
def test_malformed_answers_are_422_and_record_nothing(client, db, browser, mangle, field):
    body = client.post(CHALLENGES, json={}).json
    response = client.post(body["answers_url"], json={"answers": mangle(reference_answers(body["cases"]))})
    assert response.status_code == 422, response.json
    assert field in response.json["errors"], response.json
    with db.read() as s:
        assert s.scalars(select(ExerciseCheck)).all() == []
        assert s.get(ExerciseChallenge, body["id"]).attempts == 0


@pytest.mark.parametrize(
    "reshape, hint",
    [
        (lambda w: w[0], "the head axis is missing"),  # one head's [n][n] instead of [H][n][n]
        (lambda w: w.transpose(1, 0, 2), "the head axis comes first"),  # [n][H][n]
        (lambda w: w[:, :-1], ""),  # a query row short
    ],
)
def test_an_answer_of_the_wrong_shape_is_422_naming_the_shape_it_must_have(client, db, browser, reshape, hint):
    for _ in range(50):  # cases are random: one whose n differs from H, or [n][H][n] is [H][n][n] again
        body = client.post(CHALLENGES, json={}).json
        heads, n = body["cases"][0]["heads"], len(body["cases"][0]["tokens"])
        if heads != n:
            break
    answers = reference_answers(body["cases"])
    wrong = reshape(np.asarray(answers[0]["weights"]))
    answers[0] = {**answers[0], "weights": wrong.tolist()}
    response = client.post(body["answers_url"], json={"answers": answers})
    assert response.status_code == 422, response.json
    detail = response.json["detail"]
    assert f"answer 1: output.weights has shape {list(wrong.shape)}" in detail
    assert f"it must be [H][n][n] = [{heads}, {n}, {n}]" in detail and hint in detail
    assert "answers.0.weights" in response.json["errors"]
    with db.read() as s:
        assert s.get(ExerciseChallenge, body["id"]).attempts == 0


@pytest.mark.parametrize("bad", ["nope", "0" * 32, "g" * 32, "%C3%A9" * 16])
def test_unknown_challenge_ids_are_404(client, bad):
    response = client.get(f"{CHALLENGES}/{bad}")
    assert response.status_code == 404 and response.content_type == "application/problem+json"


def test_erasing_a_learner_removes_their_challenges(client, db, browser):
    client.post(CHALLENGES, json={})
    assert client.delete(f"/api/v1/learners/{browser}").status_code in (200, 204)
    with db.read() as s:
        assert s.scalars(select(ExerciseChallenge)).all() == []


def test_answers_with_nan_from_a_masked_diagonal_are_named_not_refused(client, browser, monkeypatch):
    body = client.post(CHALLENGES, json={}).json
    answers = handwritten_answers(body["cases"], "diagonal_masked", monkeypatch)
    assert answers[0]["weights"][0][0][0] is None  # NaN travels as null
    verdict = client.post(body["answers_url"], json={"answers": answers}).json
    assert verdict["mistakes"] == ["diagonal_masked"] and "NaN" in verdict["message"]


def test_absolute_urls_come_from_the_configured_address_never_from_the_host_header(client, browser):
    """A Host header an attacker chose does not reach the links the service hands out (issue 31)."""
    made = client.post(CHALLENGES, json={}).json
    body = client.get(f"{CHALLENGES}/{made['id']}", headers={"Host": "attacker.example"}).json
    assert body["answers_url"].startswith("http://localhost/api/v1/exercises/")
    login = client.get(
        "/lti/login",
        headers={"Host": "attacker.example"},
        query_string={"iss": "https://nobody.example", "target_link_uri": "http://attacker.example/"},
    )
    assert "attacker.example" not in login.headers.get("Location", "")


def test_a_challenge_answered_with_the_apis_own_numbers_is_recorded_as_such(client, db, browser):
    """ "Verified" proves the right numbers came back for fresh cases, not whose code made them:
    posting the cases to POST /attention is a shortcut nothing can forbid, so it is recorded
    (issue 31): the verdict says so, and the completion's data carries engine_seen."""
    challenge = client.post(CHALLENGES, json={}).json
    answers = []
    for case in challenge["cases"]:
        body = {"tokens": case["tokens"], "heads": case["heads"], "causal": case["causal"]}
        if case.get("output_projection"):
            body["projections"] = {"output": case["output_projection"]}
        trace = client.post("/api/v1/attention", json=body).json  # the shortcut
        heads = trace["heads"]
        weights, outputs = [h["weights"] for h in heads], [h["output"] for h in heads]
        answers.append(
            {"weights": weights, "head_outputs": outputs, "concatenated": trace["concat"], "output": trace["output"]}
        )
    verdict = client.post(challenge["answers_url"], json={"answers": answers}).json
    assert verdict["correct"] and "also computed by POST /api/v1/attention" in verdict["message"]
    with db.read() as s:
        data = s.scalars(select(Event.data).where(Event.event == "completed")).one()
    assert data["verification"] == "verified" and data["engine_seen"] is True


def test_a_challenge_answered_without_the_shortcut_carries_no_note(client, db, browser):
    challenge = client.post(CHALLENGES, json={}).json
    client.post(
        "/api/v1/attention", json={"tokens": [[1.0, 0.0, 0.0, 1.0]] * 3, "heads": 2}
    )  # the workbench, unrelated
    verdict = client.post(challenge["answers_url"], json={"answers": reference_answers(challenge["cases"])}).json
    assert verdict["correct"] and "POST /api/v1/attention" not in verdict["message"]
    with db.read() as s:
        data = s.scalars(select(Event.data).where(Event.event == "completed")).one()
    assert "engine_seen" not in data


def test_a_verdict_is_kept_as_data_and_read_in_the_readers_language(client, browser, monkeypatch):
    """The submit script answers in English; the learner's Spanish page polls the same challenge
    and reads the verdict in Spanish: the case, the mistake's advice, the numbers unchanged."""
    from babel.messages.pofile import read_po

    from service.exercise.diagnose import MISTAKES

    body = client.post(CHALLENGES, json={}).json
    answers = handwritten_answers(body["cases"], "no_scaling", monkeypatch)
    english = client.post(body["answers_url"], json={"answers": answers}).json
    assert english["message"].startswith("Case ") and MISTAKES["no_scaling"] in english["message"]
    spanish = client.get(f"{CHALLENGES}/{body['id']}", headers={"Accept-Language": "es"}).json["result"]
    po = ROOT / "service" / "translations" / "es" / "LC_MESSAGES" / "messages.po"
    advice = read_po(po.open("rb"), locale="es")[MISTAKES["no_scaling"]].string
    assert spanish["message"].startswith("Caso ") and advice in spanish["message"]
    assert spanish["mistakes"] == english["mistakes"] and spanish["correct"] is False
    assert [c["max_abs_error"] for c in spanish["cases"]] == [c["max_abs_error"] for c in english["cases"]]
