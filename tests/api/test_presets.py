"""Presets are ready request bodies; each four-heads pattern is checked by a property of its weights."""

import numpy as np
import pytest

pytestmark = pytest.mark.usefixtures("app")


def run_preset(client, preset_id):
    preset = client.get(f"/api/v1/presets/{preset_id}").json
    response = client.post("/api/v1/attention", json=preset["request"])
    assert response.status_code == 200, response.json
    return preset, response.json


def test_list_names_every_preset(client):
    body = client.get("/api/v1/presets").json
    names = {p["id"] for p in body["presets"]}
    assert names == {
        "workbench",
        "workbench-learned",
        "seed-split",
        "four-heads",
        "kv-cache",
        "online-softmax",
        "rope-scaling",
    }
    assert body["presets"] and all(p["title"] and p["description"] for p in body["presets"])


def test_unknown_preset_is_404_problem(client):
    response = client.get("/api/v1/presets/nope")
    assert response.status_code == 404 and response.mimetype == "application/problem+json"
    assert "workbench" in response.json["detail"]


def test_workbench_is_three_4d_tokens_two_heads_identity_causal(client):
    preset, body = run_preset(client, "workbench")
    request = preset["request"]
    assert np.array(request["tokens"]).shape == (3, 4) and request["heads"] == 2 and request["causal"] is True
    assert "projections" not in request  # identity: Q = K = V = tokens
    for h, head in enumerate(body["heads"]):
        np.testing.assert_array_equal(head["query"], np.array(request["tokens"])[:, 2 * h : 2 * h + 2])


def test_seed_split_is_the_lessons_example(client):
    _, body = run_preset(client, "seed-split")
    assert body["heads"][0]["query"] == [[1, 2]] and body["heads"][1]["query"] == [[10, 20]]
    assert body["concat"] == [[1, 2, 10, 20]]


@pytest.fixture
def four(client):
    preset, body = run_preset(client, "four-heads")
    assert body["shape"]["n"] == 6 and body["shape"]["heads"] == 4
    assert preset["patterns"] == ["recency", "first-token", "diffuse", "bimodal"]
    return [np.array(h["weights"]) for h in body["heads"]]


def test_recency_head_puts_most_weight_on_the_latest_visible_position(four):
    w = four[0]
    assert [int(np.argmax(w[i])) for i in range(6)] == list(range(6))
    assert all(w[i, i] > 0.5 for i in range(6))


def test_first_token_head_puts_the_largest_column_mass_on_position_0(four):
    w = four[1]
    mass = w.sum(axis=0)
    assert int(np.argmax(mass)) == 0 and mass[0] > 0.9 * 6
    assert all(int(np.argmax(w[i])) == 0 for i in range(6))


def test_diffuse_head_rows_are_near_uniform(four):
    w = four[2]
    for i in range(6):
        visible = w[i, : i + 1]
        assert np.abs(visible - 1 / (i + 1)).max() < 0.02
        entropy = -(visible * np.log(visible)).sum()
        assert entropy > 0.99 * np.log(i + 1) - 1e-12


def test_bimodal_head_splits_the_last_row_between_first_and_latest(four):
    last = four[3][5]
    top_two = set(np.argsort(last)[-2:].tolist())
    assert top_two == {0, 5}
    assert last[0] > 0.3 and last[5] > 0.3
    assert last[1:5].max() < min(last[0], last[5]) / 3  # a trough between the two modes


def test_four_heads_have_distinct_patterns(four):
    for a in range(4):
        for b in range(a + 1, 4):
            assert np.abs(four[a] - four[b]).max() > 0.3


def test_the_kv_cache_preset_decodes_as_mha_gqa_and_mla(client):
    request = client.get("/api/v1/presets/kv-cache").json["request"]
    for extra in ({}, {"kv_heads": 2}, {"latent": request["latent"]}):
        body = {k: v for k, v in request.items() if k != "latent"} | extra
        answer = client.post("/api/v1/attention/decode", json=body)
        assert answer.status_code == 200 and answer.json["max_difference_from_full_pass"] == 0.0
