"""RoPE scaling over HTTP: the frequency calculator (`/rope/presets`, `/rope/frequencies`) and `rope.scaling`
and `rope.offset` on every compute endpoint, each slip found by `/attention/compare` where it parts."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ..compute.plain_python import ROPE_SLIPS, inverse_frequencies, reference_mha

pytestmark = pytest.mark.usefixtures("app")

TOKENS = np.random.default_rng(62).normal(size=(6, 8)).round(3).tolist()
YARN = {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 16}


def test_every_preset_names_its_source_and_computes_its_own_table(client):
    presets = client.get("/api/v1/rope/presets").json["presets"]
    assert {p["id"] for p in presets} >= {"llama-3.1-8b", "llama-3.2-1b", "qwen2.5-7b-instruct", "deepseek-v3"}
    assert {p["scaling"]["rope_type"] for p in presets} == {"llama3", "yarn", "longrope"}
    for preset in presets:
        assert "config.json" in preset["source"], preset["id"]
        table = client.post("/api/v1/rope/frequencies", json={"preset": preset["id"]}).json
        expected, factor = inverse_frequencies(preset["head_dim"], preset["base"], preset["scaling"], preset["context"])
        got = [p["scaled_inv_freq"] for p in table["pairs"]]
        np.testing.assert_allclose(got, expected, rtol=1e-15)
        assert table["attention_factor"] == pytest.approx(factor, rel=1e-15)
        assert table["preset"] == preset["id"] and table["length"] == preset["context"]


def test_llama_3_1_through_the_calculator(client):
    table = client.post("/api/v1/rope/frequencies", json={"preset": "llama-3.1-8b"}).json
    statuses = [p["status"] for p in table["pairs"]]
    assert statuses == ["kept"] * 29 + ["blended"] * 6 + ["divided"] * 29
    pair = table["pairs"][30]
    assert pair["ratio"] == pytest.approx(0.643743, abs=5e-7)
    assert pair["wavelength"] == pytest.approx(2 * math.pi / pair["inv_freq"], rel=1e-15)
    assert table["model_base"] == 500000.0 and table["ntk_aware_base"] == pytest.approx(500000.0 * 8 ** (128 / 126))


def test_a_presets_fields_can_be_replaced_to_compare_the_papers_ramp_with_the_codes(client):
    yarn16 = {**YARN, "factor": 16.0, "original_max_position_embeddings": 4096}
    code = client.post("/api/v1/rope/frequencies", json={"head_dim": 128, "scaling": yarn16}).json
    paper = client.post("/api/v1/rope/frequencies", json={"head_dim": 128, "scaling": {**yarn16, "ramp": "paper"}}).json
    assert code["pairs"][30]["ratio"] == pytest.approx(0.639423, abs=5e-7)
    assert paper["pairs"][30]["ratio"] == pytest.approx(0.295158, abs=5e-7)
    qwen = client.post("/api/v1/rope/frequencies", json={"preset": "qwen2.5-7b-instruct", "scaling": {"ramp": "paper"}})
    assert qwen.json["scaling"]["ramp"] == "paper" and qwen.json["scaling"]["factor"] == 4.0


def test_a_slip_shows_the_frequencies_the_broken_code_computes(client):
    right = client.post("/api/v1/rope/frequencies", json={"preset": "qwen2.5-7b-instruct"}).json
    ignored = client.post(
        "/api/v1/rope/frequencies", json={"preset": "qwen2.5-7b-instruct", "failure_mode": "rope_scaling_ignored"}
    ).json
    assert {p["status"] for p in ignored["pairs"]} == {"kept"} and ignored["attention_factor"] == 1.0
    assert right["attention_factor"] == pytest.approx(0.1 * math.log(4) + 1)


@pytest.mark.parametrize(
    "body, field",
    [
        (
            {"head_dim": 64, "scaling": {"rope_type": "linear", "factor": 2.0, "beta_fast": 8.0}},
            "rope.scaling.beta_fast",
        ),
        (
            {"head_dim": 64, "scaling": {"rope_type": "yarn", "factor": 2.0}},
            "rope.scaling.original_max_position_embeddings",
        ),
        ({"preset": "phi-3.5-mini-instruct", "head_dim": 64}, "rope.scaling.short_factor"),
        ({"head_dim": 63}, "head_dim"),
        ({"preset": "gpt-5"}, "preset"),
        ({"head_dim": 2, "scaling": {"rope_type": "ntk", "factor": 2.0}}, "rope.scaling.rope_type"),
    ],
)
def test_a_configuration_the_scaling_cannot_take_is_a_422_naming_the_field(client, body, field):
    answer = client.post("/api/v1/rope/frequencies", json=body)
    assert answer.status_code == 422 and answer.mimetype == "application/problem+json"
    assert field in answer.json["errors"], answer.json


def test_attention_with_scaling_and_an_offset_equals_the_loop_and_lists_every_pair(client):
    rope = {"style": "interleaved", "scaling": YARN, "offset": 100_000}
    body = client.post("/api/v1/attention", json={"tokens": TOKENS, "heads": 2, "rope": rope}).json
    expected = reference_mha(TOKENS, 2, rope=rope)
    atol = 1e-12 * 100_006  # relative to the largest angle
    np.testing.assert_allclose(body["output"], expected["output"], rtol=1e-12, atol=atol)
    block = body["conventions"]["rope"]
    assert block["offset"] == 100_000 and block["scaling"]["rope_type"] == "yarn"
    assert block["frequencies"]["length"] == 100_006 and len(block["frequencies"]["pairs"]) == 2
    assert block["frequencies"]["attention_factor"] == pytest.approx(0.1 * math.log(8) + 1)


@pytest.mark.parametrize("mode", sorted(ROPE_SLIPS))
def test_compare_finds_each_slip_at_the_rotated_queries(client, mode):
    rope = {"style": "half", "scaling": ROPE_SLIPS[mode], "offset": 30}
    answer = client.post(
        "/api/v1/attention/compare", json={"tokens": TOKENS, "heads": 2, "rope": rope, "failure_mode": mode}
    )
    assert answer.status_code == 200, answer.json
    assert answer.json["divergence"]["first"] == "q"
    assert mode in answer.json["broken"]["conventions"]["rope"]["scaling"]["description"]


def test_the_decode_and_the_tiles_take_the_scaling_and_the_offset(client):
    rope = {"style": "half", "scaling": {"rope_type": "linear", "factor": 4.0}, "offset": 5000}
    decoded = client.post("/api/v1/attention/decode", json={"tokens": TOKENS, "heads": 2, "rope": rope}).json
    whole = client.post("/api/v1/attention", json={"tokens": TOKENS, "heads": 2, "rope": rope}).json
    assert decoded["max_difference_from_full_pass"] < 1e-9
    np.testing.assert_allclose([s["output"] for s in decoded["steps"]], whole["output"], atol=1e-9)
    tiled = client.post(
        "/api/v1/attention/tiled", json={"tokens": TOKENS, "heads": 2, "rope": rope, "block_q": 2, "block_k": 2}
    )
    assert tiled.status_code == 200, tiled.json
