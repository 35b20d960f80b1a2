"""The engine against the lesson's own facts and against the plain per-head loop."""

import numpy as np
import pytest

from service.compute import FAILURE_MODES, AttentionInputError, multi_head_attention
from service.compute.decode import one_pass

from .plain_python import LONG_CONTEXT_SLIPS, ROPE_SLIPS, reference_mha

WORKBENCH_TOKENS = [[1.0, 0.5, -0.5, 1.0], [0.2, 1.0, 1.5, -0.3], [-1.0, 0.3, 0.8, 0.6]]


# -- the lesson's facts -------------------------------------------------------------------


def test_seed_vector_splits_into_contiguous_halves():
    trace = multi_head_attention([[1, 2, 10, 20]], heads=2)
    assert trace.query[0].tolist() == [[1, 2]]
    assert trace.query[1].tolist() == [[10, 20]]
    assert trace.feature_ranges == ((0, 2), (2, 4))


def test_one_token_concat_restores_the_width_in_head_order():
    trace = multi_head_attention([[1, 2, 10, 20]], heads=2)
    # A single token attends only to itself: each head returns its own value slice.
    assert trace.concat.tolist() == [[1, 2, 10, 20]]


@pytest.mark.parametrize("changed, unchanged", [((2, 3), 0), ((0, 1), 1)])
def test_changing_one_heads_coordinates_leaves_the_other_head_alone(changed, unchanged):
    before = multi_head_attention(WORKBENCH_TOKENS, heads=2)
    edited = np.array(WORKBENCH_TOKENS)
    edited[1, list(changed)] += [0.7, -1.1]
    after = multi_head_attention(edited, heads=2)
    moved = 1 - unchanged
    assert np.array_equal(after.weights[unchanged], before.weights[unchanged])
    assert np.array_equal(after.head_outputs[unchanged], before.head_outputs[unchanged])
    assert not np.allclose(after.weights[moved], before.weights[moved])


def test_reuse_first_slice_makes_heads_identical_and_ignores_slice_one():
    trace = multi_head_attention(WORKBENCH_TOKENS, heads=2, failure_mode="reuse_first_slice")
    assert np.array_equal(trace.weights[0], trace.weights[1])
    assert np.array_equal(trace.head_outputs[0], trace.head_outputs[1])
    edited = np.array(WORKBENCH_TOKENS)
    edited[:, 2:] = [[9, -9], [4, 4], [-3, 7]]
    again = multi_head_attention(edited, heads=2, failure_mode="reuse_first_slice")
    assert np.array_equal(again.concat, trace.concat)


def test_mask_off_makes_future_weights_non_zero():
    causal = multi_head_attention(WORKBENCH_TOKENS, heads=2)
    full = multi_head_attention(WORKBENCH_TOKENS, heads=2, causal=False)
    upper = np.triu_indices(3, k=1)
    assert np.all(causal.weights[:, upper[0], upper[1]] == 0.0)
    assert np.all(full.weights[:, upper[0], upper[1]] > 0.0)
    assert causal.mask[upper].all() and not full.mask.any()


def test_shapes_follow_the_lessons_pipeline():
    trace = multi_head_attention(np.ones((3, 4)), heads=2)
    assert trace.query.shape == trace.key.shape == trace.value.shape == (2, 3, 2)
    assert trace.scores.shape == trace.weights.shape == (2, 3, 3)
    assert trace.head_outputs.shape == (2, 3, 2)
    assert trace.concat.shape == trace.output.shape == trace.residual.shape == (3, 4)
    assert trace.d_head == 2 and trace.weights.dtype == np.float64


# -- against the plain loop ----------------------------------------------------------------

CASES = [
    # n, d_model, heads, kv_heads, causal, projections, rope
    (1, 2, 1, None, True, False, None),
    (3, 4, 2, None, True, False, None),
    (5, 6, 3, None, False, True, None),
    (4, 8, 4, 2, True, True, None),
    (6, 8, 4, 1, True, True, None),
    (7, 12, 2, None, True, True, {"style": "half", "base": 10000.0}),
    (7, 12, 2, None, True, True, {"style": "interleaved", "base": 10000.0}),
    (5, 16, 4, 2, False, True, {"style": "half", "base": 500.0}),
    (9, 8, 2, 1, True, True, {"style": "interleaved", "base": 10000.0}),
]


@pytest.mark.parametrize("n, d_model, heads, kv_heads, causal, projections, rope", CASES)
def test_engine_equals_the_per_head_loop(n, d_model, heads, kv_heads, causal, projections, rope):
    rng = np.random.default_rng(n * 100 + d_model)
    x = rng.normal(size=(n, d_model))
    kv_width = (kv_heads or heads) * (d_model // heads)
    weights = {}
    if projections:
        weights = {
            "w_q": rng.normal(size=(d_model, d_model)) / 2,
            "w_k": rng.normal(size=(d_model, kv_width)) / 2,
            "w_v": rng.normal(size=(d_model, kv_width)) / 2,
            "w_o": rng.normal(size=(d_model, d_model)) / 2,
        }
    trace = multi_head_attention(x, heads, causal=causal, kv_heads=kv_heads, rope=rope, **weights)
    ref = reference_mha(
        x.tolist(), heads, causal=causal, kv_heads=kv_heads, rope=rope, **{k: v.tolist() for k, v in weights.items()}
    )
    for name in ("query", "key", "value", "scores", "weights", "head_outputs", "concat", "output", "residual"):
        np.testing.assert_allclose(getattr(trace, name), np.array(ref[name]), rtol=0, atol=1e-12, err_msg=name)


def test_rope_styles_give_different_numbers():
    x = np.random.default_rng(3).normal(size=(5, 8))
    half = multi_head_attention(x, 2, rope="half")
    interleaved = multi_head_attention(x, 2, rope="interleaved")
    assert not np.allclose(half.query, interleaved.query)
    # Position 0 is never rotated, in either style.
    assert np.array_equal(half.query[:, 0], interleaved.query[:, 0])


def test_trace_arrays_are_read_only_and_inputs_untouched():
    x = np.random.default_rng(0).normal(size=(3, 4))
    copy = x.copy()
    trace = multi_head_attention(x, 2)
    with pytest.raises(ValueError):
        trace.weights[0, 0, 0] = 5
    x[0, 0] = 99.0  # the caller's array stays the caller's
    assert np.array_equal(trace.tokens, copy)


# -- errors --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, message, field",
    [
        ({"x": np.ones((2, 6)), "heads": 4}, "d_model 6 is not divisible by heads 4", "heads"),
        ({"x": np.ones((2, 8)), "heads": 4, "kv_heads": 3}, "heads 4 is not divisible by kv_heads 3", "kv_heads"),
        ({"x": np.ones((2, 6)), "heads": 2, "rope": "half"}, "even d_head", "rope"),
        ({"x": np.ones((2, 4)), "heads": 2, "rope": "spiral"}, "unknown RoPE style 'spiral'", "rope.style"),
        ({"x": np.ones((2, 4)), "heads": 2, "failure_mode": "oops"}, "unknown failure mode 'oops'", "failure_mode"),
        ({"x": np.ones((2, 4)), "heads": 0}, "heads must be a positive integer", "heads"),
        ({"x": [[1, 2], [3]], "heads": 1}, "rectangular matrix", "tokens"),
        ({"x": [[]], "heads": 1}, "non-empty 2-D matrix", "tokens"),
        ({"x": [1, 2, 3, 4], "heads": 1}, "non-empty 2-D matrix", "tokens"),
        ({"x": [["a", "b"]], "heads": 1}, "matrix of numbers", "tokens"),
        ({"x": [[1.0, float("nan")]], "heads": 1}, "tokens row 1, column 2 (counting from 1) is nan", "tokens"),
        (
            {"x": [[1.0, 2.0], [float("inf"), 0]], "heads": 2},
            "tokens row 2, column 1 (counting from 1) is inf",
            "tokens",
        ),
        (
            {"x": np.ones((2, 4)), "heads": 2, "w_q": np.ones((4, 3))},
            "projections.query must have shape [4][4]",
            "projections.query",
        ),
        (
            {"x": np.ones((2, 4)), "heads": 2, "kv_heads": 1, "w_k": np.ones((4, 4))},
            "projections.key must have shape [4][2]",
            "projections.key",
        ),
    ],
)
def test_invalid_input_names_the_numbers_and_the_field(kwargs, message, field):
    x = kwargs.pop("x")
    with pytest.raises(AttentionInputError, match=None) as info:
        multi_head_attention(x, **kwargs)
    assert message in str(info.value)
    assert info.value.field == field
    assert isinstance(info.value, ValueError)


def test_overflow_while_computing_is_an_input_error_not_nan():
    x = np.full((3, 4), 1e200)
    with pytest.raises(AttentionInputError, match="overflowed float64"):
        multi_head_attention(x, 2)


def test_projection_overflow_is_reported():
    with pytest.raises(AttentionInputError, match="query projection") as info:
        multi_head_attention(np.full((2, 2), 1e300), 1, w_q=np.full((2, 2), 1e300))
    assert info.value.field == "projections.query"


def test_an_output_projection_overflow_names_the_output_projection():
    with pytest.raises(AttentionInputError, match="output projection concat @ W_O") as info:
        multi_head_attention(np.full((2, 2), 1e150), 2, w_o=np.full((2, 2), 1e200))  # scores stay finite
    assert info.value.field == "projections.output"


def test_large_but_finite_logits_stay_finite():
    x = np.random.default_rng(1).normal(size=(6, 8)) * 1e3  # scores around 1e6
    trace = multi_head_attention(x, 2)
    assert np.isfinite(trace.weights).all() and np.isfinite(trace.output).all()
    np.testing.assert_allclose(trace.weights.sum(-1), 1.0)


# the long-context slips: test_long_context.py; RoPE scaling's: test_rope.py
@pytest.mark.parametrize("mode", sorted(set(FAILURE_MODES) - set(LONG_CONTEXT_SLIPS) - set(ROPE_SLIPS)))
@pytest.mark.parametrize("kv_heads", [None, 1])
def test_each_failure_mode_equals_the_loop_written_the_broken_way(mode, kv_heads):
    rng = np.random.default_rng(7)
    x = rng.normal(size=(5, 8))
    kv_width = (kv_heads or 2) * 4
    weights = {
        "w_q": rng.normal(size=(8, 8)),
        "w_k": rng.normal(size=(8, kv_width)),
        "w_v": rng.normal(size=(8, kv_width)),
        "w_o": rng.normal(size=(8, 8)),
    }
    trace = one_pass(x, 2, kv_heads=kv_heads, failure_mode=mode, **weights)
    ref = reference_mha(
        x.tolist(), 2, kv_heads=kv_heads, failure_mode=mode, **{k: v.tolist() for k, v in weights.items()}
    )
    for name in ("scores", "weights", "head_outputs", "concat", "output", "residual"):
        np.testing.assert_allclose(getattr(trace, name), np.array(ref[name]), rtol=0, atol=1e-12, err_msg=name)


def test_a_bias_of_the_wrong_width_is_refused_by_name():
    from service.compute.errors import AttentionInputError

    with pytest.raises(AttentionInputError, match=r"biases\.key must be 4 finite numbers"):
        multi_head_attention(np.eye(3, 4), 2, b_k=np.zeros(3))


@pytest.mark.parametrize("reference", [False, True], ids=["engine", "spec"])
@pytest.mark.parametrize(
    "tokens, kwargs, field",
    [
        ([[1e200, 1e200, 1.0, 1.0]] * 2, {"w_q": np.eye(4) * 1e150}, "projections.query"),
        ([[1e200, 1e200, 1.0, 1.0]] * 2, {"w_v": np.eye(4) * 1e150}, "projections.value"),
        ([[1e308, 1.0, 1.0, 1.0]], {"b_q": [1e308] * 4}, "biases.query"),
        ([[1.5e308, 1.5e308, 1.0, 1.0]] * 2, {"rope": "half"}, "rope"),
        ([[1e150, 1e150, 1.0, 1.0]] * 2, {"w_q": np.eye(4) * 1e60}, "projections.query"),  # Q K^T overflows
    ],
    ids=["projection", "value projection", "bias", "rope", "scores of a projection"],
)
def test_an_overflow_names_the_input_that_made_it(reference, tokens, kwargs, field):
    """An overflow in a projection, a bias or RoPE names that input, in the engine and its spec alike."""
    with pytest.raises(AttentionInputError) as info:
        multi_head_attention(tokens, 2, reference=reference, **kwargs)
    assert info.value.field == field
