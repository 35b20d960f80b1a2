"""POST /attention with `latent`, POST /attention/decode, and /attention/compare for the decoding
failure modes: the numbers are the pure-Python loops', the cache is what each step appended."""

import numpy as np
import pytest

from ...compute.plain_python import reference_decode, reference_mha

pytestmark = pytest.mark.usefixtures("app")

RNG = np.random.default_rng(39)
X = RNG.normal(size=(5, 8)).round(3)
W = {name: (RNG.normal(size=(8, 8)) / 3).round(3) for name in ("query", "key", "value", "output")}
LATENT = {
    "down": (RNG.normal(size=(8, 3)) / 3).round(3).tolist(),
    "up_key": (RNG.normal(size=(3, 8))).round(3).tolist(),
    "up_value": (RNG.normal(size=(3, 8))).round(3).tolist(),
    "rope_key": (RNG.normal(size=(8, 2)) / 3).round(3).tolist(),
    "rope_query": (RNG.normal(size=(8, 4)) / 3).round(3).tolist(),
}


def post(client, path, body, status=200):
    response = client.post(f"/api/v1/attention{path}", json=body)
    assert response.status_code == status, response.json
    return response.json


@pytest.mark.parametrize("absorbed", [False, True])
def test_latent_attention_answers_the_paper_s_numbers_and_what_its_cache_holds(client, absorbed):
    body = post(
        client,
        "",
        {
            "tokens": X.tolist(),
            "heads": 2,
            "latent": {**LATENT, "absorbed": absorbed},
            "rope": {"style": "half"},
            "projections": {"query": W["query"].tolist()},
        },
    )
    ref = reference_mha(X.tolist(), 2, latent=LATENT, rope={"style": "half"}, w_q=W["query"].tolist())
    for part in ("concat", "output", "residual"):
        np.testing.assert_allclose(body[part], ref[part], rtol=0, atol=1e-10, err_msg=part)
    for h, head in enumerate(body["heads"]):
        np.testing.assert_allclose(head["weights"], ref["weights"][h], rtol=0, atol=1e-12)
        assert ("key" in head) != absorbed and ("latent_query" in head) == absorbed
    assert body["cache"] == {"kind": "mla", "elements_per_token": 3 + 2, "elements": 5 * (3 + 2)}  # 5 positions
    np.testing.assert_allclose(body["latent"], X @ np.array(LATENT["down"]), rtol=0, atol=1e-12)
    assert np.array(body["rope_key"]).shape == (5, 2)


def test_every_attention_answer_says_what_its_cache_holds(client):
    mha = post(client, "", {"tokens": X.tolist(), "heads": 4})["cache"]
    assert mha == {"kind": "mha", "elements_per_token": 2 * 4 * 2, "elements": 5 * 16}  # a key and a value per head
    gqa = post(client, "", {"tokens": X.tolist(), "heads": 4, "kv_heads": 2})["cache"]
    mqa = post(client, "", {"tokens": X.tolist(), "heads": 4, "kv_heads": 1})["cache"]
    assert gqa == {"kind": "gqa", "elements_per_token": 8, "elements": 40}
    assert mqa == {"kind": "mqa", "elements_per_token": 4, "elements": 20}


@pytest.mark.parametrize("prefill", [1, 2, 5])
def test_each_decode_step_is_the_generation_loop_s_new_row_and_its_cache(client, prefill):
    body = post(
        client,
        "/decode",
        {
            "tokens": X.tolist(),
            "heads": 4,
            "kv_heads": 2,
            "prefill": prefill,
            "rope": {"style": "interleaved"},
            "projections": {
                "query": W["query"].tolist(),
                "key": W["key"][:, :4].tolist(),
                "value": W["value"][:, :4].tolist(),
            },
        },
    )
    ref = reference_decode(
        X.tolist(),
        4,
        W["query"].tolist(),
        W["key"][:, :4].tolist(),
        W["value"][:, :4].tolist(),
        kv_heads=2,
        rope={"style": "interleaved"},
        prefill=prefill,
    )
    assert body["prefill"] == prefill and len(body["steps"]) == 5
    assert body["max_difference_from_full_pass"] < 1e-12
    for t, step in enumerate(body["steps"]):
        assert step["position"] == t and step["prefill"] == (t < prefill)
        for h, head in enumerate(step["heads"]):
            assert head["kv_head"] == h // 2 and len(head["weights"]) == t + 1
            np.testing.assert_allclose(head["weights"], ref["weights"][h][t][: t + 1], rtol=0, atol=1e-12)
            np.testing.assert_allclose(head["query"], ref["query"][h][t], rtol=0, atol=1e-12)
            np.testing.assert_allclose(head["key"], ref["key"][h][t], rtol=0, atol=1e-12)
            np.testing.assert_allclose(head["output"], ref["head_outputs"][h][t], rtol=0, atol=1e-12)
        np.testing.assert_allclose(step["residual"], ref["residual"][t], rtol=0, atol=1e-12)
        keys = np.array(step["cache"]["key"])
        assert keys.shape == (2, t + 1, 2) and step["cache_elements"] == (t + 1) * 2 * 2 * 2
        np.testing.assert_allclose(keys[1], ref["key"][2][: t + 1], rtol=0, atol=1e-12)  # kv head 1 serves heads 3, 4


def test_a_latent_decode_caches_the_latent_and_the_rope_key(client):
    body = post(client, "/decode", {"tokens": X.tolist(), "heads": 2, "latent": {**LATENT, "absorbed": True}})
    assert body["cache"] == {"kind": "mla", "elements_per_token": 5, "elements": 25}
    last = body["steps"][-1]
    assert set(last["cache"]) == {"latent", "rope_key"} and np.array(last["cache"]["latent"]).shape == (5, 3)
    assert last["cache_elements"] == 5 * 5 and "key" not in last["heads"][0] and "latent_query" in last["heads"][0]
    assert body["max_difference_from_full_pass"] < 1e-12


def test_a_broken_decode_says_how_far_it_is_from_the_full_pass(client):
    body = post(client, "/decode", {"tokens": X.tolist(), "heads": 2, "failure_mode": "decode_mask_top_left"})
    assert body["max_difference_from_full_pass"] > 0.01
    for step in body["steps"][1:]:
        for head in step["heads"]:
            assert head["weights"][0] == 1.0 and set(head["weights"][1:]) == {0.0}
            assert head["scores"][0] is not None and all(s is None for s in head["scores"][1:])


def test_attending_before_appending_leaves_the_own_score_null(client):
    body = post(client, "/decode", {"tokens": X.tolist(), "heads": 2, "failure_mode": "cache_not_appended"})
    first = body["steps"][0]["heads"][0]
    assert first["scores"] == [None] and first["weights"] == [0.0] and first["output"] == [0.0] * 4
    assert all(step["heads"][0]["scores"][-1] is None for step in body["steps"])


@pytest.mark.parametrize(
    "extra, field",
    [
        ({"prefill": 6}, "prefill"),
        ({"prefill": 0}, "prefill"),
        ({"causal": False}, "causal"),
        ({"prefill": 1.0}, "prefill"),
        ({"kv_heads": 3}, "kv_heads"),
    ],
)
def test_a_decode_that_cannot_be_made_is_a_422_naming_the_field(client, extra, field):
    body = post(client, "/decode", {"tokens": X.tolist(), "heads": 2, **extra}, status=422)
    assert field in body["errors"]


def test_a_decode_too_large_to_answer_is_a_413_naming_its_cap(client):
    body = post(client, "/decode", {"tokens": [[0.1] * 64] * 200, "heads": 4}, status=413)
    assert "max_decode_cells" in body["limits"] and "tokens" in body["errors"]


@pytest.mark.parametrize(
    "mode, extra, first",
    [
        ("gqa_tiled", {"heads": 4, "kv_heads": 2}, "k"),
        ("decode_mask_top_left", {}, "weights"),
        ("decode_position_reset", {"rope": {"style": "half"}}, "q"),
        ("cache_not_appended", {}, "weights"),
        ("decode_position_reset", {}, None),  # without RoPE a position changes nothing
    ],
)
def test_compare_names_the_first_divergent_stage_of_the_new_modes(client, mode, extra, first):
    body = post(client, "/compare", {"tokens": X.tolist(), "heads": 2, **extra, "failure_mode": mode})
    assert body["divergence"]["first"] == first
