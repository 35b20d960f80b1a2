"""The online-softmax exercise's implement checkpoint, earned as the first exercise's is: fresh random
cases, answered by the learner's own loop, checked by the server. Right answers come from the softmax
taken whole, written here (no tiles, no engine); wrong ones from the exercise's own loop making each slip
(exercises/online-softmax/tests/slips.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import select

from service.db.tables import CheckpointProgress, ExerciseCheck

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "exercises" / "online-softmax" / "tests"))
import slips as exercise  # noqa: E402

CHALLENGES = "/api/v1/exercises/online-softmax/challenges"


def whole(case) -> dict:
    """The softmax taken whole: output [n, d] and each row's L, with Q = K = V = the tokens."""
    x = np.asarray(case["tokens"], dtype=float)
    scores = x @ x.T / np.sqrt(x.shape[1])
    if case["causal"]:
        scores = np.where(np.tril(np.ones_like(scores)) > 0, scores, -np.inf)
    top = scores.max(axis=1, keepdims=True)
    lse = (top + np.log(np.exp(scores - top).sum(axis=1, keepdims=True)))[:, 0]
    return {"output": (np.exp(scores - lse[:, None]) @ x).tolist(), "lse": lse.tolist()}


def slipped(case, slips: tuple[str, ...]) -> dict:
    x = np.asarray(case["tokens"], dtype=float)
    with np.errstate(all="ignore"):
        out, lse = exercise.tiled(x, x, x, case["block_q"], case["block_k"], case["causal"], slips)
    nulls = lambda a: [nulls(r) for r in a] if isinstance(a, list) else (a if np.isfinite(a) else None)  # noqa: E731
    return {"output": nulls(out.tolist()), "lse": nulls(np.asarray(lse).tolist())}


def checkpoint(client, learner, lesson, id_="implement") -> dict:
    response = client.get(f"/api/v1/learners/{learner}/progress?lesson={lesson}")
    if response.status_code == 404:
        return {"completed": False}
    return next(c for c in response.json["lessons"][0]["checkpoints"] if c["id"] == id_)


@pytest.fixture
def browser(client):
    return client.post("/api/v1/session").json["learner"]


@pytest.mark.databases
def test_a_learner_solves_fresh_cases_and_completes_the_online_lessons_implement(client, db, browser):
    body = client.post(CHALLENGES, json={}).json
    assert (body["lesson"], body["checkpoint"], body["status"]) == ("online-softmax", "implement", "open")
    assert body["answers_url"].endswith(f"/online-softmax/challenges/{body['id']}/answers")
    result = client.post(body["answers_url"], json={"answers": [whole(c) for c in body["cases"]]})
    assert result.status_code == 200, result.json
    assert result.json["correct"] is True and result.json["completed"] is True
    assert checkpoint(client, browser, "online-softmax") | {"completed": True, "verification": "verified"} == (
        checkpoint(client, browser, "online-softmax")
    )
    assert not checkpoint(client, browser, "multi-head-attention")["completed"]  # the other lesson's stays open
    with db.read() as s:
        assert len(s.scalars(select(ExerciseCheck).where(ExerciseCheck.lesson == "online-softmax")).all()) == 3
        progress = s.scalars(select(CheckpointProgress).where(CheckpointProgress.lesson == "online-softmax")).one()
    assert progress.checkpoint == "implement" and progress.verification == "verified"


def test_the_cases_are_small_two_causal_and_every_slip_shows_in_each_case_it_can(client, browser):
    for _ in range(5):
        cases = client.post(CHALLENGES, json={}).json["cases"]
        assert [c["causal"] for c in cases] == [True, True, False]
        for case in cases:
            n = len(case["tokens"])
            assert 4 <= n <= 6 and len(case["tokens"][0]) in (4, 6, 8) and "heads" not in case
            assert 1 <= case["block_q"] < n and 1 <= case["block_k"] < n  # more than one tile of keys
            right = np.array(whole(case)["output"])
            for slip in exercise.SLIPS:
                if slip == "online_diagonal_skipped" and not case["causal"]:
                    continue  # no diagonal tile to skip without the mask
                wrong = np.array(slipped(case, (slip,))["output"], dtype=float)
                assert not np.allclose(np.nan_to_num(wrong, nan=1e9), right, atol=1e-6), (slip, case)


@pytest.mark.parametrize("slips", [(s,) for s in exercise.SLIPS] + [tuple(exercise.SLIPS)], ids=str)
def test_a_loop_making_slips_is_refused_naming_them(client, browser, slips):
    body = client.post(CHALLENGES, json={}).json
    result = client.post(body["answers_url"], json={"answers": [slipped(c, slips) for c in body["cases"]]}).json
    assert result["correct"] is False and result["completed"] is False
    assert set(result["mistakes"]) == set(slips), result
    assert result["message"].startswith("Case 1 (") and "tiles of" in result["message"]
    assert client.get(f"{CHALLENGES}/{body['id']}").json["status"] == "open"
    assert not checkpoint(client, browser, "online-softmax")["completed"]


def test_an_answer_without_L_or_of_the_wrong_shape_is_422_and_records_nothing(client, db, browser):
    body = client.post(CHALLENGES, json={}).json
    answers = [whole(c) for c in body["cases"]]
    missing = client.post(body["answers_url"], json={"answers": [{"output": a["output"]} for a in answers]})
    assert missing.status_code == 422 and "lse" in str(missing.json["errors"])
    short = [{**a, "lse": a["lse"][:-1]} for a in answers]
    refused = client.post(body["answers_url"], json={"answers": short})
    assert refused.status_code == 422 and refused.json["errors"].keys() == {"answers.0.lse"}
    assert client.get(f"{CHALLENGES}/{body['id']}").json["attempts"] == 0
    with db.read() as s:
        assert s.scalars(select(ExerciseCheck)).all() == []


def test_one_exercises_challenge_is_not_found_under_the_other(client, browser):
    online = client.post(CHALLENGES, json={}).json
    multi = client.post("/api/v1/exercises/multi-head-attention/challenges", json={}).json
    assert client.get(f"/api/v1/exercises/multi-head-attention/challenges/{online['id']}").status_code == 404
    assert client.get(f"{CHALLENGES}/{multi['id']}").status_code == 404
    answers = {"answers": [whole(c) for c in online["cases"]]}
    wrong_door = client.post(f"{CHALLENGES}/{multi['id']}/answers", json=answers)
    assert wrong_door.status_code == 404


def test_cases_computed_by_the_api_while_open_are_recorded_as_seen(client, browser):
    body = client.post(CHALLENGES, json={}).json
    case = body["cases"][0]
    body_ = {"tokens": case["tokens"], "heads": 1, "causal": case["causal"], "block_q": 2, "block_k": 2}
    traced = client.post("/api/v1/attention/tiled", json=body_)
    assert traced.status_code == 200
    result = client.post(body["answers_url"], json={"answers": [whole(c) for c in body["cases"]]}).json
    assert result["correct"] is True and "POST /api/v1/attention" in result["message"]


def test_the_verdict_speaks_the_learners_language(client, browser):
    body = client.post(CHALLENGES, json={}).json
    answers = {"answers": [slipped(c, ("online_no_rescale",)) for c in body["cases"]]}
    said = client.post(body["answers_url"], json=answers, headers={"Accept-Language": "es"}).json
    assert said["message"].startswith("Caso 1 (") and "bloques de" in said["message"], said["message"]
