"""Grades back: a launched learner's completed checkpoints reach the platform's line item as a
score, once per change, in the background, through failures and restarts."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import select

from service.app import create_app
from service.db.erasure import erase_learner
from service.db.lti_tables import LtiGradeLink
from service.lti import grades
from tests.api.helpers import completed, experiment
from tests.api.test_challenges import CHALLENGES, reference_answers

from .lms_server import LmsServer

pytestmark = pytest.mark.databases  # SQLite and PostgreSQL

LESSON = "multi-head-attention"


def launch(client, lms_server: LmsServer, sub: str = "user-42") -> str:
    params = lms_server.platform.login(client)
    claims = lms_server.platform.claims(params["nonce"], sub=sub, **lms_server.grades_claim())
    assert lms_server.platform.launch(client, params["state"], lms_server.platform.id_token(claims)).status_code == 303
    return client.get("/api/v1/session").get_json()["learner"]


def complete(client, learner: str, *checkpoints: str) -> None:
    """As the pages do it: text for the prediction and the explanation, an edit in the workbench,
    a solved challenge for the implementation."""
    for checkpoint in checkpoints:
        if checkpoint == "implement":
            challenge = client.post(CHALLENGES, json={}).json  # for the session's learner
            answers = {"answers": reference_answers(challenge["cases"])}
            assert client.post(challenge["answers_url"], json=answers).json["correct"]
            continue
        bodies = experiment(learner) if checkpoint == "experiment" else [completed(checkpoint, learner)]
        for body in bodies:
            assert client.post("/api/v1/events", json=body).status_code == 201


def send(app, now: dt.datetime | None = None) -> dict[str, int]:
    return grades.send_once(app.extensions["db"], app.extensions["lessons"], now)


def test_two_checkpoints_done_is_two_of_four_on_the_platform_once(app, client, lms_server):
    learner = launch(client, lms_server)
    assert send(app) == {"sent": 0, "failed": 0}  # launched, nothing done yet: no score to send
    complete(client, learner, "predict", "explain")
    assert send(app) == {"sent": 1, "failed": 0}
    (score,) = lms_server.scores["/lineitems/1"]
    total = len(app.extensions["lessons"][LESSON].checkpoints)
    assert (score["scoreGiven"], score["scoreMaximum"], total) == (2, 4, 4)
    assert score["userId"] == "user-42"  # the platform's id for its user
    assert (score["activityProgress"], score["gradingProgress"]) == ("InProgress", "FullyGraded")
    assert dt.datetime.fromisoformat(score["timestamp"]).tzinfo is not None
    assert send(app) == {"sent": 0, "failed": 0}  # no change, nothing sent
    complete(client, learner, "predict")  # done already: the count does not change
    assert send(app) == {"sent": 0, "failed": 0} and len(lms_server.scores["/lineitems/1"]) == 1


def test_all_checkpoints_done_completes_the_activity(app, client, lms_server):
    learner = launch(client, lms_server)
    complete(client, learner, "predict", "experiment", "implement", "explain")
    send(app)
    score = lms_server.scores["/lineitems/1"][-1]
    assert (score["scoreGiven"], score["activityProgress"]) == (4, "Completed")


def test_a_platform_that_fails_is_retried_later_and_nothing_is_lost_across_a_restart(
    app, client, lms_server, app_config
):
    learner = launch(client, lms_server)
    complete(client, learner, "predict", "explain")
    lms_server.refuse = 1
    now = dt.datetime.now(dt.UTC)
    assert send(app, now) == {"sent": 0, "failed": 1}
    with app.extensions["db"].read() as session:
        link = session.scalar(select(LtiGradeLink))
        assert link.failures == 1 and link.sent is None and link.last_error
    assert send(app, now + dt.timedelta(seconds=1)) == {"sent": 0, "failed": 0}  # backing off
    restarted = create_app(app_config)  # a new process: the outbox is the database
    try:
        later = now + dt.timedelta(minutes=5)
        assert grades.send_once(restarted.extensions["db"], restarted.extensions["lessons"], later)["sent"] == 1
    finally:
        restarted.extensions["db"].dispose()
    assert [s["scoreGiven"] for s in lms_server.scores["/lineitems/1"]] == [2]


def test_each_learner_and_line_item_gets_its_own_score(app, client, lms_server):
    ada = launch(client, lms_server, "ada")
    complete(client, ada, "predict")
    other = app.test_client()
    bob = launch(other, lms_server, "bob")
    complete(other, bob, "predict", "explain", "experiment")
    send(app)
    assert sorted((s["userId"], s["scoreGiven"]) for s in lms_server.scores["/lineitems/1"]) == [("ada", 1), ("bob", 3)]


def test_erasing_the_learner_forgets_where_their_grades_went(app, client, lms_server, db):
    learner = launch(client, lms_server)
    with db.read() as session:
        platform_id = session.scalar(select(LtiGradeLink.platform_id))
    erase_learner(db, platform_id, learner)
    with db.read() as session:
        assert session.scalar(select(LtiGradeLink)) is None


def test_the_grades_command_sends_a_pass(app, client, lms_server, monkeypatch):
    from click.testing import CliRunner

    from service.cli import main

    learner = launch(client, lms_server)
    complete(client, learner, "predict")
    monkeypatch.setenv("WORKBENCH_DATABASE_URL", app.extensions["settings"].database_url)
    result = CliRunner().invoke(main, ["lti", "grades"])
    assert result.output.strip() == "sent 1 scores, 0 failed (retried later)"
    assert [s["scoreGiven"] for s in lms_server.scores["/lineitems/1"]] == [1]
