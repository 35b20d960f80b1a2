"""Tests for your multi_head_attention. Each failure names the mistake and shows the evidence.

Run: pytest exercises/multi-head-attention/tests   (MHA_EXERCISE=path/to/file.py tests another file)
"""

import math

import numpy as np
import pytest

from mistakes import attention, fmt, looks_like, run, which

# Three 4-d tokens, two heads of width 2: the workbench's case.
TOKENS = [[1.0, 0.5, -0.5, 1.0], [0.2, 1.0, 1.5, -0.3], [-1.0, 0.3, 0.8, 0.6]]
# Every feature of a token equal: any way of splitting gives the same slices, so only the
# attention itself (scaling, mask, softmax) decides the numbers.
UNIFORM = [[1.0] * 4, [2.0] * 4, [-1.0] * 4, [0.5] * 4]


def test_output_shapes(mha):
    result = run(mha, TOKENS, 2)
    expected = {"weights": (2, 3, 3), "head_outputs": (2, 3, 2), "concatenated": (3, 4)}
    names = {"weights": "[H][n][n]", "head_outputs": "[H][n][d_head]", "concatenated": "[n][d_model]"}
    for part, shape in expected.items():
        assert result[part].shape == shape, (
            f"wrong output shape: {part} has shape {result[part].shape}; it must be {names[part]} = {shape} "
            "for 3 tokens of width 4 and 2 heads"
        )


def test_incompatible_head_count_explains_itself(mha):
    with pytest.raises(Exception) as info:
        mha([[1.0] * 6, [2.0] * 6], 4)
    text = str(info.value)
    assert "6" in text and "4" in text, (
        f"an incompatible head count must fail with a message naming both numbers (d_model 6, heads 4); "
        f"got {type(info.value).__name__}({text!r})"
    )


def test_each_head_reads_its_own_contiguous_slice(mha):
    # One token whose feature f (numbered from 1) holds 10 + f: each head returns exactly the slice it received.
    token = [[11.0, 12.0, 13.0, 14.0]]
    result = run(mha, token, 2)
    got = [[int(round(v)) - 10 for v in result["head_outputs"][h][0]] for h in range(2)]
    want = [[1, 2], [3, 4]]
    if got == want:
        return
    if got == [[1, 3], [2, 4]]:
        pytest.fail(
            f"head 2 received features {got[1]}; the split must be contiguous: {want[1]} "
            "(features were interleaved across heads; features numbered from 1)"
        )
    if got == [[1, 2], [1, 2]]:
        pytest.fail(
            f"head 2 received features {got[1]}, the same as head 1; each head must read its own "
            f"slice ({want[1]} for head 2), or features 3-4 are lost"
        )
    pytest.fail(f"the heads received features {got} (numbered from 1); the split must be contiguous: {want}")


def test_concatenation_keeps_head_order(mha):
    result = run(mha, TOKENS, 2)
    in_order = np.concatenate(list(result["head_outputs"]), axis=1)
    reversed_ = np.concatenate(list(result["head_outputs"])[::-1], axis=1)
    if not np.allclose(result["concatenated"], in_order, atol=1e-9) and np.allclose(
        result["concatenated"], reversed_, atol=1e-9
    ):
        pytest.fail(
            "the heads were concatenated in reverse order: columns 1-2 must hold head 1, "
            f"got {fmt(result['concatenated'][0, :2])} (head 2's output)"
        )
    assert np.allclose(result["concatenated"], in_order, atol=1e-9), (
        "concatenated must be the head outputs side by side, head 1 first"
    )


def test_scores_are_scaled_by_sqrt_d_head(mha):
    result = run(mha, UNIFORM, 2, causal=False)
    expected = attention(UNIFORM, 2, causal=False)
    if np.allclose(result["weights"], expected["weights"], atol=1e-9):
        return
    mistake = which(result, UNIFORM, 2, False, ["no_scaling", "scale_by_d_model"], parts=("weights",))
    got, want = fmt(result["weights"][0, 1]), fmt(expected["weights"][0, 1])
    if mistake == "no_scaling":
        pytest.fail(
            f"scores were not divided by sqrt(d_head) = {math.sqrt(2):.3f}: query 2's weights are "
            f"{got}, expected {want}"
        )
    if mistake == "scale_by_d_model":
        pytest.fail(
            f"scores were divided by sqrt(d_model) = 2 instead of sqrt(d_head) = {math.sqrt(2):.3f}: "
            f"query 2's weights are {got}, expected {want}"
        )
    pytest.fail(
        f"query 2's weights are {got}, expected {want} (scores divided by sqrt(d_head), mask off)"
        + looks_like(result, UNIFORM, 2, False)
    )


def test_mask_hides_the_future_before_the_softmax(mha):
    # Judged by structure, not exact values, so a scaling bug does not hide a masking bug.
    w = run(mha, UNIFORM, 2, causal=True)["weights"][0]
    n = len(UNIFORM)
    future, past = np.triu(np.ones((n, n), bool), 1), np.tril(np.ones((n, n), bool), -1)
    if np.any(w[future] > 1e-12):
        if np.all(np.abs(w[past]) < 1e-12):
            pytest.fail(
                f"the weights are transposed: row 1 is {fmt(w[0])}; row i must be query i's "
                "distribution over the keys (weight on tokens up to i, none after)"
            )
        if np.allclose(w[0, 1:], w[0, 1]):
            pytest.fail(
                f"future scores were set to 0 instead of -inf: query 1 still puts {w[0, 1]:.3f} on each future token"
            )
        pytest.fail(f"no causal mask: query 1 puts {w[0, 1]:.3f} on the future token 2")
    if np.any(np.abs(np.diagonal(w)) < 1e-12):
        pytest.fail(
            f"the diagonal is masked too: the weights on the diagonal are {fmt(np.diagonal(w))}; a "
            "token must attend to itself (mask j > i, not j >= i)"
        )
    sums = w.sum(axis=1)
    if not np.allclose(sums, 1.0, atol=1e-9):
        if np.allclose(w.sum(axis=0), 1.0, atol=1e-9):
            pytest.fail(
                f"the softmax ran over the queries (columns sum to 1, rows to {fmt(sums)}); "
                "normalise each row over the keys"
            )
        pytest.fail(
            f"row 1 of head 1 sums to {sums[0]:.3f}, not 1: the mask was applied after the softmax; "
            "set future scores to -inf before normalising"
        )


def test_rows_are_distributions_over_keys(mha):
    result = run(mha, TOKENS, 2, causal=False)
    sums = result["weights"].sum(axis=2)
    assert np.allclose(sums, 1.0, atol=1e-9), (
        f"each row of weights must sum to 1 (a distribution over keys); head 1's rows sum to {fmt(sums[0])}"
        + (
            ": the softmax ran over the queries (columns) instead of the keys"
            if np.allclose(result["weights"].sum(axis=1), 1.0)
            else ""
        )
    )


def test_output_projection_is_applied(mha):
    w_o = np.arange(16, dtype=float).reshape(4, 4) / 10
    try:
        result = run(mha, TOKENS, 2, output_projection=w_o)
    except TypeError:
        pytest.fail("multi_head_attention must accept output_projection=W_O (a [d_model][d_model] matrix)")
    assert "output" in result, "return the projected result as 'output' (concatenated @ W_O)"
    if np.allclose(result["output"], result["concatenated"]):
        pytest.fail(
            "output equals the concatenated heads: the output projection was not applied "
            "(output = concatenated @ W_O mixes features across heads)"
        )
    assert np.allclose(result["output"], result["concatenated"] @ w_o, atol=1e-9), (
        "output must be concatenated @ W_O (row vectors)"
    )


def test_the_workbench_case_end_to_end(mha, failed_so_far):
    if failed_so_far:
        pytest.skip("fix the failures above first: this checks every number once they pass")
    result = run(mha, TOKENS, 2)
    expected = attention(TOKENS, 2)
    for part in ("weights", "head_outputs", "concatenated"):
        assert np.allclose(result[part], expected[part], atol=1e-9), (
            f"{part} differs from the expected result (largest difference "
            f"{np.abs(result[part] - expected[part]).max():.3g}) although the checks above pass"
        )
