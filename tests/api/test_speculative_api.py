"""The speculative decoding API as a platform calls it: the rule on posted distributions (the lesson's case,
a slip beside it, the errors a wrong body gets) and the trained model's rounds (a seeded run answered twice
alike, temperature 0 equal to the target alone, a slip's first difference, sizes refused before computing)."""

from __future__ import annotations

import pytest

RULE = "/api/v1/speculative/acceptance"
SPECULATE = "/api/v1/models/bytes-2l-attn/speculate"


def test_the_rule_on_the_lessons_case(client):
    body = client.post(RULE, json={"p": [0.6, 0.3, 0.1], "q": [0.3, 0.5, 0.2], "gamma": 8}).json
    assert body["alpha"] == pytest.approx(0.7, abs=1e-15) and body["total_variation"] == pytest.approx(0.3)
    assert body["acceptance"] == pytest.approx([1.0, 0.6, 0.5], abs=1e-15)
    assert body["residual"] == pytest.approx([1.0, 0.0, 0.0], abs=1e-15)
    assert body["emitted"] == pytest.approx([0.6, 0.3, 0.1], abs=1e-15) and body["emitted_error"] < 1e-15
    assert body["expected_tokens"]["formula"] == pytest.approx(3.198821, abs=5e-7)
    assert [c["gamma"] for c in body["curve"]] == list(range(1, 17))
    assert all(c["formula"] == pytest.approx(c["enumerated"], abs=1e-12) for c in body["curve"])


def test_a_slip_is_answered_beside_the_rule_with_its_total_variation(client):
    body = {"p": [0.5, 0.3, 0.2], "q": [0.2, 0.2, 0.6], "failure_mode": "residual_from_target"}
    answer = client.post(RULE, json=body).json
    # rejections (mass 1 - 0.6) drawn from p: emitted = min(p, q) + 0.4 p
    assert answer["broken"]["emitted"] == pytest.approx([0.2 + 0.4 * 0.5, 0.2 + 0.4 * 0.3, 0.2 + 0.4 * 0.2])
    assert answer["broken"]["total_variation"] == pytest.approx(0.1)  # (0.1 + 0.02 + 0.08) / 2
    assert answer["emitted"] == pytest.approx(body["p"], abs=1e-15)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"p": [0.6, 0.3, 0.2], "q": [0.3, 0.5, 0.2]}, "p"),
        ({"p": [0.6, 0.4], "q": [0.3, 0.5, 0.2]}, "q"),
        ({"p": [1.0], "q": [1.0]}, "p"),
        ({"p": [0.5, 0.5], "q": [0.5, 0.5], "gamma": 17}, "gamma"),
        ({"p": [0.5, 0.5], "q": [0.5, 0.5], "failure_mode": "cache_not_rolled_back"}, "failure_mode"),
        ({"p": [0.5, 0.5], "q": [0.5, 0.5], "temperature": -1}, "temperature"),
    ],
)
def test_a_wrong_body_gets_a_422_that_names_the_field(client, body, field):
    response = client.post(RULE, json=body)
    assert response.status_code == 422 and response.mimetype == "application/problem+json"
    assert field in response.json["errors"]


def test_a_seeded_run_is_answered_twice_alike_and_each_round_keeps_its_cache(client):
    body = {"prompt": "The ", "gamma": 4, "max_new_tokens": 24, "temperature": 0.9, "seed": 42, "draft": "lens"}
    first, second = (client.post(SPECULATE, json=body).json for _ in range(2))
    assert first == second and len(first["tokens"]) == 24
    assert first["target_passes"] == len(first["rounds"]) and first["accepted"] <= first["drafted"]
    for r in first["rounds"]:
        assert r["cache"]["verified"] == r["cache"]["before"] + len(r["drafts"]) + 1  # the block: gamma + 1 rows
        assert r["cache"]["after"] == r["cache"]["accepted_prefix"]
    other = client.post(SPECULATE, json={**body, "seed": 43}).json
    assert other["rounds"] != first["rounds"]


@pytest.mark.parametrize("draft", ["lens", "bigram"])
def test_temperature_0_emits_what_the_target_alone_does(client, draft):
    body = {"prompt": "def f(x):\n    return ", "max_new_tokens": 32, "temperature": 0, "draft": draft}
    answer = client.post(SPECULATE, json=body).json
    assert answer["tokens"] == answer["target_only"] and answer["first_difference"] is None


def test_a_slip_is_found_at_its_first_round(client):
    body = {"prompt": "The ", "max_new_tokens": 32, "temperature": 0.7, "seed": 9, "failure_mode": "shared_uniform"}
    found = client.post(SPECULATE, json=body).json["first_difference"]
    assert found["what"] == "emitted" and found["total_variation"] > 1e-6
    kept = client.post(SPECULATE, json={**body, "failure_mode": "cache_not_rolled_back"}).json["first_difference"]
    assert kept["what"] in {"emitted", "cache"}


def test_a_prompt_that_leaves_no_room_is_refused_before_computing(client):
    response = client.post(SPECULATE, json={"prompt": "x" * 100, "max_new_tokens": 64})
    assert response.status_code == 413 and response.json["limits"] == {"prompt_bytes": 64}
    assert client.post("/api/v1/models/all-minilm-l6-v2/speculate", json={"prompt": "x"}).status_code in (404, 422)
