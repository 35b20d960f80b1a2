"""Each failure mode computes what its broken code would, and differs from the correct result
exactly in the way its name says."""

import numpy as np
import pytest

from service.compute import FAILURE_MODES
from service.compute.decode import one_pass

from .plain_python import as_engine, slip_context

RNG = np.random.default_rng(42)
X = RNG.normal(size=(5, 8))  # n=5, d_model=8, H=2, d_head=4
W = {name: RNG.normal(size=(8, 8)) / 3 for name in ("w_q", "w_k", "w_v", "w_o")}


def run(mode=None, **kwargs):
    return one_pass(X, 2, failure_mode=mode, **{**W, **kwargs})


def test_every_mode_changes_the_result_where_its_step_exists():
    """Grouped-query heads to tile and RoPE to turn at the wrong position: every mode has its step."""
    x = RNG.normal(size=(6, 8))
    w = {"w_q": W["w_q"], "w_k": W["w_k"][:, :4], "w_v": W["w_v"][:, :4], "w_o": W["w_o"]}
    for mode in set(FAILURE_MODES) - {"cache_not_truncated"}:  # the same numbers in more memory (its own test)
        context = as_engine({"rope": "half", **slip_context(mode, 4)})
        correct = one_pass(x, 4, kv_heads=2, **context, **w)
        broken = one_pass(x, 4, kv_heads=2, failure_mode=mode, **context, **w)
        assert not np.allclose(broken.output, correct.output), mode


@pytest.mark.parametrize("mode", ["gqa_tiled", "decode_position_reset"])
def test_a_mode_whose_step_is_absent_changes_nothing(mode):
    """Tiling kv heads needs 1 < kv_heads < heads; a wrong RoPE position needs RoPE."""
    np.testing.assert_allclose(run(mode).output, run().output, rtol=0, atol=1e-15)


def test_reuse_first_slice_reads_slice_zero_in_every_head():
    broken = run("reuse_first_slice")
    correct = run()
    assert np.array_equal(broken.features, [[0, 1, 2, 3], [0, 1, 2, 3]])
    assert np.array_equal(broken.weights[1], broken.weights[0])
    np.testing.assert_array_equal(broken.weights[0], correct.weights[0])


def test_interleaved_split_takes_every_hth_feature():
    broken = run("interleaved_split")
    assert broken.features.tolist() == [[0, 2, 4, 6], [1, 3, 5, 7]]
    assert broken.feature_ranges == (None, None)
    q_full = X @ W["w_q"]
    np.testing.assert_allclose(broken.query[1], q_full[:, 1::2], rtol=0, atol=1e-14)


def test_no_scaling_multiplies_scores_by_sqrt_d_head():
    np.testing.assert_allclose(run("no_scaling").scores, run().scores * np.sqrt(4), rtol=1e-12)


def test_scale_by_d_model_divides_by_sqrt_d_model():
    np.testing.assert_allclose(run("scale_by_d_model").scores, run().scores * np.sqrt(4) / np.sqrt(8), rtol=1e-12)


def test_mask_after_softmax_rows_no_longer_sum_to_one():
    broken = run("mask_after_softmax")
    sums = broken.weights.sum(axis=-1)
    assert np.all(sums[:, :-1] < 1.0)  # every row but the last lost the future's mass
    np.testing.assert_allclose(sums[:, -1], 1.0)
    assert np.all(broken.weights[:, np.triu(np.ones((5, 5), bool), 1)] == 0.0)
    unmasked = run(causal=False)
    np.testing.assert_allclose(broken.weights, np.tril(unmasked.weights), rtol=1e-12)


def test_mask_after_softmax_without_a_mask_is_correct():
    np.testing.assert_array_equal(run("mask_after_softmax", causal=False).weights, run(causal=False).weights)


def test_swapped_head_order_swaps_the_column_blocks():
    broken, correct = run("swapped_head_order"), run()
    np.testing.assert_array_equal(broken.concat[:, :4], correct.concat[:, 4:])
    np.testing.assert_array_equal(broken.concat[:, 4:], correct.concat[:, :4])


def test_no_output_projection_stops_at_concatenation():
    broken, correct = run("no_output_projection"), run()
    np.testing.assert_array_equal(broken.output, broken.concat)
    np.testing.assert_array_equal(broken.concat, correct.concat)
    np.testing.assert_array_equal(broken.residual, X + correct.concat)


@pytest.mark.parametrize("mode", sorted(FAILURE_MODES))
def test_failure_modes_work_with_grouped_query_attention_and_rope(mode):
    x = RNG.normal(size=(6, 8))
    trace = one_pass(x, 4, kv_heads=2, failure_mode=mode, **as_engine({"rope": "half", **slip_context(mode, 4)}))
    assert np.isfinite(trace.output).all()
