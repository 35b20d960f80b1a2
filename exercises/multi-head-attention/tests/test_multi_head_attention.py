"""Tests for your multi_head_attention. Each failure names the mistake and shows the evidence.

Run: pytest exercises/multi-head-attention/tests   (MHA_EXERCISE=path/to/file.py tests another file)
The TypeScript tests (multi-head-attention.test.ts) check the same things in the same words.
"""

import math

import numpy as np
import pytest
from mistakes import attention, fmt, looks_like, run, say, which

# Three 4-d tokens, two heads of width 2: the workbench's case.
TOKENS = [[1.0, 0.5, -0.5, 1.0], [0.2, 1.0, 1.5, -0.3], [-1.0, 0.3, 0.8, 0.6]]
# Every feature of a token equal: any way of splitting gives the same slices, so only the
# attention itself (scaling, mask, softmax) decides the numbers: the known weights below.
UNIFORM = [[1.0] * 4, [2.0] * 4, [-1.0] * 4, [0.5] * 4]


def test_output_shapes(mha):
    run(mha, TOKENS, 2)  # a wrong shape fails here, with what it looks like went wrong


def test_incompatible_head_count_explains_itself(mha):
    try:
        mha([[1.0] * 6, [2.0] * 6], 4)
    except Exception as exc:  # any error will do, if its message names both numbers
        text = str(exc)
        assert "6" in text and "4" in text, say("head_count", error=f"{type(exc).__name__}({text!r})")
    else:
        pytest.fail(say("head_count_returned"), pytrace=False)


def test_each_head_reads_its_own_contiguous_slice(mha):
    # One token whose feature f (numbered from 1) holds 10 + f: each head returns exactly the slice it received.
    token = [[11.0, 12.0, 13.0, 14.0]]
    result = run(mha, token, 2)
    got = [[int(round(v)) - 10 for v in result["head_outputs"][h][0]] for h in range(2)]
    want = [[1, 2], [3, 4]]
    if got == want:
        return
    if got == [[1, 3], [2, 4]]:
        pytest.fail(say("interleaved_split", got=got[1], want=want[1]), pytrace=False)
    if got == [[1, 2], [1, 2]]:
        pytest.fail(say("reuse_first_slice", got=got[1], want=want[1]), pytrace=False)
    pytest.fail(say("split_other", got=got, want=want), pytrace=False)


def test_concatenation_keeps_head_order(mha):
    result = run(mha, TOKENS, 2)
    in_order = np.concatenate(list(result["head_outputs"]), axis=1)
    reversed_ = np.concatenate(list(result["head_outputs"])[::-1], axis=1)
    if np.allclose(result["concatenated"], in_order, atol=1e-9):
        return
    if np.allclose(result["concatenated"], reversed_, atol=1e-9):
        pytest.fail(say("swapped_head_order", got=fmt(result["concatenated"][0, :2])), pytrace=False)
    pytest.fail(say("concat_other"), pytrace=False)


def test_scores_are_scaled_by_sqrt_d_head(mha):
    result = run(mha, UNIFORM, 2, causal=False)
    expected = attention(UNIFORM, 2, causal=False)
    if np.allclose(result["weights"], expected["weights"], atol=1e-9):
        return
    mistake = which(result, UNIFORM, 2, False, ["no_scaling", "scale_by_d_model"], parts=("weights",))
    got, want = fmt(result["weights"][0, 1]), fmt(expected["weights"][0, 1])
    if mistake:
        pytest.fail(say(mistake, root=f"{math.sqrt(2):.3f}", got=got, want=want), pytrace=False)
    pytest.fail(say("scale_other", got=got, want=want, looks_like=looks_like(result, UNIFORM, 2, False)), pytrace=False)


def test_mask_hides_the_future_before_the_softmax(mha):
    # Judged by structure, not exact values, so a scaling bug does not hide a masking bug.
    w = run(mha, UNIFORM, 2, causal=True)["weights"][0]
    n = len(UNIFORM)
    future, past = np.triu(np.ones((n, n), bool), 1), np.tril(np.ones((n, n), bool), -1)
    if np.any(w[future] > 1e-12):
        if np.all(np.abs(w[past]) < 1e-12):
            pytest.fail(say("weights_transposed", row=fmt(w[0])), pytrace=False)
        if np.allclose(w[0, 1:], w[0, 1]):
            pytest.fail(say("zero_mask", weight=f"{w[0, 1]:.3f}"), pytrace=False)
        pytest.fail(say("no_mask", weight=f"{w[0, 1]:.3f}"), pytrace=False)
    if np.any(np.abs(np.diagonal(w)) < 1e-12):
        pytest.fail(say("diagonal_masked", diagonal=fmt(np.diagonal(w))), pytrace=False)
    sums = w.sum(axis=1)
    if not np.allclose(sums, 1.0, atol=1e-9):
        if np.allclose(w.sum(axis=0), 1.0, atol=1e-9):
            pytest.fail(say("softmax_wrong_axis", sums=fmt(sums)), pytrace=False)
        pytest.fail(say("mask_after_softmax", sum=f"{sums[0]:.3f}"), pytrace=False)


def test_rows_are_distributions_over_keys(mha):
    result = run(mha, TOKENS, 2, causal=False)
    sums = result["weights"].sum(axis=2)
    if np.allclose(sums, 1.0, atol=1e-9):
        return
    axis = say("rows_sum_axis") if np.allclose(result["weights"].sum(axis=1), 1.0) else ""
    pytest.fail(say("rows_sum", sums=fmt(sums[0]), axis=axis), pytrace=False)


def test_output_projection_is_applied(mha):
    w_o = np.arange(16, dtype=float).reshape(4, 4) / 10
    result = run(mha, TOKENS, 2, output_projection=w_o.tolist())
    if np.allclose(result["output"], result["concatenated"]):
        pytest.fail(say("no_output_projection"), pytrace=False)
    assert np.allclose(result["output"], result["concatenated"] @ w_o, atol=1e-9), say("projection_wrong")


def test_the_workbench_case_end_to_end(mha, failed_so_far):
    if failed_so_far:
        pytest.skip(say("end_to_end_wait"))
    result = run(mha, TOKENS, 2)
    expected = attention(TOKENS, 2)
    for part in ("weights", "head_outputs", "concatenated"):
        error = np.abs(result[part] - expected[part]).max()
        assert np.allclose(result[part], expected[part], atol=1e-9), say("end_to_end", part=part, error=f"{error:.3g}")
