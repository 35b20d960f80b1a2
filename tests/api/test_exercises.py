"""The exercise checker over HTTP: diagnosis, strict input, recording for identified learners."""

import pytest
from sqlalchemy import select

from service.compute import multi_head_attention
from service.db.tables import ExerciseCheck

from .helpers import LESSON

CHECK = "/api/v1/exercises/multi-head-attention/check"
TOKENS = [[1.0, 0.5, -0.5, 1.0], [0.2, 1.0, 1.5, -0.3], [-1.0, 0.3, 0.8, 0.6]]


def body(mode=None, **extra):
    trace = multi_head_attention(TOKENS, 2, failure_mode=mode)
    return {
        "case": {"tokens": TOKENS, "heads": 2, "causal": True},
        "output": {"weights": trace.weights.tolist(), "concatenated": trace.concat.tolist()},
        **extra,
    }


def test_a_failure_mode_output_is_named(client):
    response = client.post(CHECK, json=body("interleaved_split"))
    assert response.status_code == 200
    result = response.json
    assert (result["correct"], result["diagnosis"]) == (False, "interleaved_split")
    assert result["max_abs_error"] > 0 and "contiguous" in result["message"] and result["recorded"] is False


def test_a_correct_output_is_correct(client):
    result = client.post(CHECK, json=body()).json
    assert result["correct"] is True and result["diagnosis"] is None and result["mistakes"] == []


@pytest.mark.parametrize(
    "output, field",
    [
        ({"weights": [[[1, 0], [0, 1]]]}, "output.weights"),
        ({"weights": [[["a", 0, 0]] * 3] * 2}, "output.weights"),
        ({"weights": [[["NaN", 0, 0]] * 3] * 2}, "output.weights"),
        ({"concatenated": [[1, 2, 3]]}, "output.concatenated"),
        ({}, "output"),
        ({"weights": "lots"}, "output.weights"),
    ],
)
def test_malformed_outputs_are_422(client, output, field):
    response = client.post(CHECK, json={"case": {"tokens": TOKENS, "heads": 2}, "output": output})
    assert response.status_code == 422, response.json
    assert field in response.json["errors"]


def test_a_nan_literal_is_not_json_so_400(client):
    raw = b'{"case": {"tokens": [[1, 2]], "heads": 1}, "output": {"concatenated": [[NaN, 1]]}}'
    assert client.post(CHECK, data=raw, content_type="application/json").status_code == 400


def test_oversized_cases_are_413(client):
    response = client.post(
        CHECK, json={"case": {"tokens": [[1.0] * 4] * 100, "heads": 2}, "output": {"concatenated": [[1.0] * 4] * 100}}
    )
    assert response.status_code == 413


@pytest.mark.databases
def test_a_platform_learners_checks_are_recorded_but_never_complete_implement(client, db, acme):
    # A check is a diagnosis of a case the learner chose: only a challenge (random cases) verifies.
    wrong = client.post(CHECK, json=body("no_scaling", learner="ada"), headers=acme).json
    assert wrong["recorded"] is True
    right = client.post(CHECK, json=body(learner="ada"), headers=acme).json
    assert right["correct"] and right["recorded"]
    progress = client.get(f"/api/v1/learners/ada/progress?lesson={LESSON}", headers=acme).json
    assert not next(c for c in progress["lessons"][0]["checkpoints"] if c["id"] == "implement")["completed"]
    with db.read() as s:
        rows = s.scalars(select(ExerciseCheck).order_by(ExerciseCheck.id)).all()
    assert [(r.learner, r.correct, r.diagnosis) for r in rows] == [("ada", False, "no_scaling"), ("ada", True, None)]


@pytest.mark.databases
def test_a_browser_learners_check_is_their_own(client, db):
    learner = client.post("/api/v1/session").json["learner"]
    assert client.post(CHECK, json=body()).json["recorded"] is True
    assert client.post(CHECK, json=body(learner="web-someone-else")).status_code == 403
    assert client.get(f"/api/v1/learners/{learner}/events").json["events"] == []
    with db.read() as s:
        assert [r.learner for r in s.scalars(select(ExerciseCheck))] == [learner]


def test_the_starter_is_downloadable(client):
    response = client.get("/api/v1/exercises/multi-head-attention/starter.py")
    assert response.status_code == 200 and b"def multi_head_attention" in response.data
    assert "attachment" in response.headers["Content-Disposition"]
    response.close()
