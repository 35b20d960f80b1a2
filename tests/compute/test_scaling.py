"""RoPE scaling (service/compute/scaling.py): every type against its definition written again for the test
(tests/compute/plain_python.py, from Hugging Face's modeling_rope_utils), the figures a reader can check
by hand, and Hugging Face's own initialisation where torch and transformers are installed."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from service.compute import multi_head_attention
from service.compute.errors import AttentionInputError
from service.compute.rope import RopeConfig, pairs_table
from service.compute.scaling import Scaling, frequencies

from . import plain_python as ref

MODELS = json.loads((Path(__file__).resolve().parents[2] / "service" / "rope_models.json").read_text())["models"]
LLAMA31 = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}
YARN16 = {"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 4096}
PHI = next(m for m in MODELS if m["id"] == "phi-3.5-mini-instruct")["scaling"]

# (width, base, scaling, lengths): every type, and each of its options
CASES = [
    (128, 500000.0, LLAMA31, [1]),
    (64, 500000.0, {**LLAMA31, "factor": 32.0}, [1]),
    (128, 500000.0, {**LLAMA31, "low_freq_factor": 2.0, "high_freq_factor": 8.0}, [1]),
    (128, 10000.0, YARN16, [1]),
    (128, 10000.0, {**YARN16, "truncate": False}, [1]),
    (128, 10000.0, {**YARN16, "ramp": "paper"}, [1]),
    (128, 10000.0, {**YARN16, "beta_fast": 16.0, "beta_slow": 2.0}, [1]),
    (64, 10000.0, {**YARN16, "factor": 40.0, "mscale": 1.0, "mscale_all_dim": 0.707}, [1]),
    (64, 150000.0, {**YARN16, "factor": 32.0, "attention_factor": 1.5}, [1]),
    (128, 10000.0, {"rope_type": "linear", "factor": 4.0}, [1]),
    (128, 10000.0, {"rope_type": "ntk", "factor": 4.0}, [1]),
    (128, 10000.0, {"rope_type": "dynamic", "factor": 4.0, "original_max_position_embeddings": 4096}, [1, 4096, 9000]),
    (96, 10000.0, PHI, [1, 4096, 4097, 131072]),
    (8, 10000.0, {**PHI, "short_factor": [1, 2, 3, 4], "long_factor": [2, 4, 8, 16], "factor": 4.0}, [8, 5000]),
]


@pytest.mark.parametrize(("width", "base", "scaling", "lengths"), CASES, ids=lambda c: str(c)[:40])
def test_every_scaling_equals_its_definition_to_float64(width, base, scaling, lengths):
    rope = RopeConfig(base=base, scaling=Scaling.coerce(scaling))
    for length in lengths:
        expected, factor = ref.inverse_frequencies(width, base, scaling, length)
        f = frequencies(base, rope.scaling, width, length)
        np.testing.assert_allclose(f.scaled, expected, rtol=1e-15, atol=0)
        assert f.attention_factor == pytest.approx(factor, rel=1e-15)


def statuses(scaling: dict, width: int, base: float) -> dict[str, list[int]]:
    table = pairs_table(RopeConfig(base=base, scaling=Scaling.coerce(scaling)), width, 1)["pairs"]
    return {s: [p["pair"] for p in table if p["status"] == s] for s in ("kept", "blended", "divided")}


def test_llama_3_1_keeps_29_pairs_blends_6_and_divides_the_slowest_29():
    found = statuses(LLAMA31, 128, 500000.0)
    assert found == {"kept": list(range(29)), "blended": list(range(29, 35)), "divided": list(range(35, 64))}
    pair30 = pairs_table(RopeConfig(base=500000.0, scaling=Scaling.coerce(LLAMA31)), 128, 1)["pairs"][30]
    assert pair30["ratio"] == pytest.approx(0.643743, abs=5e-7)
    smooth = (8192 / (2 * math.pi / 500000.0 ** (-60 / 128)) - 1) / 3  # by hand: the blend's weight
    assert pair30["kept_share"] == pytest.approx(smooth, rel=1e-12)


def test_llama_3_2_at_factor_32_blends_three_pairs():
    found = statuses({**LLAMA31, "factor": 32.0}, 64, 500000.0)
    assert found == {"kept": list(range(15)), "blended": [15, 16, 17], "divided": list(range(18, 32))}


def test_yarn_bounds_code_and_paper_ramps_and_its_attention_factor():
    code = pairs_table(RopeConfig(scaling=Scaling.coerce(YARN16)), 128, 1)
    paper = pairs_table(RopeConfig(scaling=Scaling.coerce({**YARN16, "ramp": "paper"})), 128, 1)
    assert code["yarn_bounds"] == [20, 46]
    assert code["pairs"][30]["ratio"] == pytest.approx(0.639423, abs=5e-7)
    assert paper["pairs"][30]["ratio"] == pytest.approx(0.295158, abs=5e-7)
    assert code["attention_factor"] == pytest.approx(1.277259, abs=5e-7) == 0.1 * math.log(16) + 1
    assert [p["status"] for p in code["pairs"][:21]] == ["kept"] * 21
    assert {p["status"] for p in code["pairs"][46:]} == {"divided"}


def test_ntk_aware_base_at_factor_4_and_d_128():
    f = frequencies(10000.0, Scaling(rope_type="ntk", factor=4.0), 128, 1)
    assert f.base == pytest.approx(40889.94, abs=0.005)
    assert f.scaled[0] == 1.0 and f.scaled[-1] == pytest.approx(f.original[-1] / 4, rel=1e-12)


def test_dynamic_is_unscaled_up_to_the_training_length_and_follows_the_length_past_it():
    dynamic = Scaling(rope_type="dynamic", factor=4.0, original_max_position_embeddings=4096)
    at = {n: frequencies(10000.0, dynamic, 64, n).scaled for n in (1, 4096, 8192, 16384)}
    assert np.array_equal(at[1], frequencies(10000.0, None, 64, 1).scaled) and np.array_equal(at[4096], at[1])
    assert np.all(at[16384][1:] < at[8192][1:]) and np.all(at[8192][1:] < at[4096][1:])


def test_a_field_the_type_does_not_read_is_refused_by_name():
    cases = [
        ({"rope_type": "linear", "factor": 2.0, "beta_fast": 32.0}, "rope.scaling.beta_fast"),
        ({"rope_type": "yarn", "factor": 2.0}, "rope.scaling.original_max_position_embeddings"),
        ({**LLAMA31, "low_freq_factor": 4.0, "high_freq_factor": 1.0}, "rope.scaling.high_freq_factor"),
        ({"rope_type": "linear", "factor": 0.5}, "rope.scaling.factor"),
        ({"type": "yarn", "rope_type": "linear", "factor": 2.0}, "rope.scaling.type"),
        ({"rope_type": "wavy", "factor": 2.0}, "rope.scaling.rope_type"),
    ]
    for scaling, field in cases:
        with pytest.raises(AttentionInputError) as caught:
            RopeConfig(scaling=Scaling.coerce(scaling))
        assert caught.value.field == field, scaling
    with pytest.raises(AttentionInputError) as caught:
        multi_head_attention(np.ones((2, 8)), 2, rope={"style": "half", "scaling": {**PHI, "short_factor": [1.0]}})
    assert caught.value.field == "rope.scaling.short_factor"


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m["id"])
def test_every_preset_equals_hugging_faces_own_initialisation(model):
    """transformers' ROPE_INIT_FUNCTIONS computes in float32: equal to its precision (relative 1e-6)."""
    pytest.importorskip("torch", reason="the parity tests need torch (.ci/run installs the CPU wheel)")
    rope_utils = pytest.importorskip("transformers.modeling_rope_utils", reason="needs transformers (.ci/run)")
    from transformers import LlamaConfig

    scaling = dict(model["scaling"])
    big = scaling["original_max_position_embeddings"]
    config = LlamaConfig(
        hidden_size=model["head_dim"] * 2,
        num_attention_heads=2,
        head_dim=model["head_dim"],
        max_position_embeddings=model["context"],
        rope_parameters={"rope_theta": model["base"], **scaling},
    )
    for length in sorted({1, big, big + 1, model["context"]}):
        hf, factor = rope_utils.ROPE_INIT_FUNCTIONS[scaling["rope_type"]](config, "cpu", seq_len=length)
        ours = frequencies(model["base"], Scaling.coerce(scaling), model["head_dim"], length)
        np.testing.assert_allclose(ours.scaled, hf.double().numpy(), rtol=1e-6)
        assert ours.attention_factor == pytest.approx(factor, rel=1e-6)


def test_linear_divides_every_pair_and_ntk_keeps_only_the_fastest():
    assert statuses({"rope_type": "linear", "factor": 4.0}, 64, 10000.0)["divided"] == list(range(32))
    ntk = pairs_table(RopeConfig(scaling=Scaling(rope_type="ntk", factor=4.0)), 64, 1)["pairs"]
    assert [p["status"] for p in ntk] == ["kept"] + ["rescaled"] * 31
    assert all(p["kept_share"] is None for p in ntk)
