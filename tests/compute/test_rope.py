"""RoPE (service/compute/rope.py): the rotation, the offset, and the scaled pass and decode against the
plain per-head loops (tests/compute/plain_python.py), each slip of the scaling where it parts."""

from __future__ import annotations

import numpy as np
import pytest

from service.compute import multi_head_attention
from service.compute.decode import decode_attention
from service.compute.divergence import divergence, stage_arrays
from service.compute.errors import AttentionInputError
from service.compute.rope import RopeConfig, rotate
from service.compute.scaling import Scaling

from . import plain_python as ref

LLAMA31 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}


def test_rope_keeps_pair_norms_and_leaves_position_zero_alone():
    x = np.random.default_rng(2).normal(size=(2, 5, 6))
    for style, pairs in (("half", [(0, 3), (1, 4), (2, 5)]), ("interleaved", [(0, 1), (2, 3), (4, 5)])):
        r = rotate(x, RopeConfig(style=style))
        assert np.array_equal(r[:, 0], x[:, 0])
        for a, b in pairs:
            np.testing.assert_allclose(np.hypot(r[..., a], r[..., b]), np.hypot(x[..., a], x[..., b]))


def test_linear_at_factor_s_equals_unscaled_rope_at_every_position_divided_by_s():
    x = np.random.default_rng(5).normal(size=(2, 9, 8))
    positions = np.arange(9) * 7.0 + 3
    for style in ("half", "interleaved"):
        linear = RopeConfig(style=style, scaling=Scaling(rope_type="linear", factor=8.0))
        np.testing.assert_allclose(
            rotate(x, linear, positions), rotate(x, RopeConfig(style=style), positions / 8.0), rtol=1e-14, atol=1e-15
        )


# The scaled pass and decode: 7 tokens of width 16, two query heads sharing one key/value head (GQA), a
# training length of 16 so every type changes something at these positions.
SHORT = 16
YARN = {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": SHORT}
LONGROPE = {"rope_type": "longrope", "factor": 8.0, "original_max_position_embeddings": SHORT}
SCALED = {
    "linear": {"rope_type": "linear", "factor": 4.0},
    "ntk": {"rope_type": "ntk", "factor": 4.0},
    "dynamic": {"rope_type": "dynamic", "factor": 4.0, "original_max_position_embeddings": SHORT},
    "yarn": YARN,
    "yarn-paper": {**YARN, "ramp": "paper", "beta_fast": 4.0, "beta_slow": 0.5},
    "llama3": {**LLAMA31, "original_max_position_embeddings": SHORT},
    "longrope": {**LONGROPE, "short_factor": [1.0, 1.5, 2.0, 3.0], "long_factor": [1.0, 2.0, 6.0, 9.0]},
}


def tolerance(offset: int, n: int) -> float:
    """1e-12 relative to the largest angle (pair 0 turns one radian a position): float64 carries about
    1e-16 of each angle, so near position 100,000 about 1e-11."""
    return 1e-12 * max(1.0, offset + n)


@pytest.mark.parametrize("kind", sorted(SCALED))
@pytest.mark.parametrize("style", ["half", "interleaved"])
@pytest.mark.parametrize("offset", [0, 100_000])
def test_the_scaled_pass_equals_the_plain_loops(kind, style, offset):
    rng = np.random.default_rng(11)
    x = rng.normal(size=(7, 16))
    w_k = rng.normal(size=(16, 8)) * 0.5
    rope = {"style": style, "base": 10000.0, "scaling": SCALED[kind], "offset": offset}
    trace = multi_head_attention(x, 2, w_k=w_k, kv_heads=1, rope=rope)
    expected = ref.reference_mha(x.tolist(), 2, w_k=w_k.tolist(), kv_heads=1, rope=rope)
    atol = tolerance(offset, 7)
    for part in ("query", "key", "scores", "weights", "output"):
        got = getattr(trace, part if part != "key" else "key")
        np.testing.assert_allclose(got, np.array(expected[part]), rtol=1e-12, atol=atol, err_msg=part)


@pytest.mark.parametrize("kind", sorted(SCALED))
@pytest.mark.parametrize("offset", [0, 100_000])
def test_a_decode_with_scaling_equals_the_pass_for_every_type_but_dynamic(kind, offset):
    x = np.random.default_rng(12).normal(size=(7, 16))
    rope = {"style": "half", "scaling": SCALED[kind], "offset": offset}
    whole = multi_head_attention(x, 2, kv_heads=1, rope=rope)
    decoded = decode_attention(x, 2, kv_heads=1, rope=rope, prefill=2)
    plain = ref.reference_decode(x.tolist(), 2, kv_heads=1, rope=rope, prefill=2)
    np.testing.assert_allclose(decoded.output, np.array(plain["output"]), rtol=1e-12, atol=tolerance(offset, 7))
    agree = np.allclose(decoded.output, whole.output, rtol=1e-12, atol=tolerance(offset, 7))
    # dynamic's base follows the length: a position decoded past L turned at a smaller base than the pass's
    assert agree is not (kind == "dynamic" and offset + 7 > SHORT)


def test_the_offset_moves_every_position_and_keeps_what_only_distance_decides():
    x = np.random.default_rng(13).normal(size=(5, 8))
    near = multi_head_attention(x, 2, rope={"style": "half"})
    far = multi_head_attention(x, 2, rope={"style": "half", "offset": 5000})
    np.testing.assert_allclose(far.scores, near.scores, rtol=1e-9, atol=1e-9)  # q_i . k_j depends on i - j
    assert not np.allclose(far.query, near.query)
    with pytest.raises(AttentionInputError) as caught:
        multi_head_attention(x, 2, rope={"style": "half", "offset": -1})
    assert caught.value.field == "rope.offset"


@pytest.mark.parametrize("mode", ref.ROPE_SLIPS)
def test_each_scaling_slip_equals_the_loop_written_the_broken_way_and_parts_at_the_rotated_query(mode):
    x = np.random.default_rng(14).normal(size=(7, 16))
    rope = {"style": "half", "scaling": ref.ROPE_SLIPS[mode], "offset": 40}
    broken = multi_head_attention(x, 2, kv_heads=1, rope=rope, failure_mode=mode)
    expected = ref.reference_mha(x.tolist(), 2, kv_heads=1, rope=rope, failure_mode=mode)
    for part in ("query", "scores", "weights", "output"):
        np.testing.assert_allclose(getattr(broken, part), np.array(expected[part]), rtol=1e-12, atol=1e-12)
    right = multi_head_attention(x, 2, kv_heads=1, rope=rope)
    found = divergence(stage_arrays(right), stage_arrays(broken))
    assert found["first"] == "q", found


def test_a_scaling_slip_without_what_it_slips_on_is_refused_naming_what_to_give():
    x = np.ones((3, 8))
    cases = [
        ("rope_scaling_ignored", {"style": "half"}, "rope.scaling"),
        ("attention_factor_ignored", {"style": "half", "scaling": {"rope_type": "linear", "factor": 2.0}}, "attention"),
        ("ramp_reversed", {"style": "half", "scaling": SCALED["llama3"]}, "yarn"),
        ("wavelength_without_2pi", {"style": "half", "scaling": SCALED["yarn"]}, "llama3"),
    ]
    for mode, rope, words in cases:
        with pytest.raises(AttentionInputError, match=words) as caught:
            multi_head_attention(x, 2, rope=rope, failure_mode=mode)
        assert caught.value.field == "failure_mode"
