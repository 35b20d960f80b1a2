"""The stage functions on their own: inverse pairs, masks, softmax edge cases."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.compute import fused, parallel, steps


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 6), st.integers(1, 5), st.integers(1, 5))
def test_split_and_merge_heads_are_inverse(heads, d_head, n):
    x = np.random.default_rng(heads * d_head + n).normal(size=(n, heads * d_head))
    split = steps.split_heads(x, heads)
    assert split.shape == (heads, n, d_head)
    assert np.array_equal(steps.merge_heads(split), x)
    assert np.array_equal(steps.gather_heads(x, steps.contiguous_features(heads, d_head)), split)


def test_causal_mask_is_top_left_aligned():
    assert steps.causal_mask(3).tolist() == [[False, True, True], [False, False, True], [False, False, False]]


def test_softmax_of_a_fully_masked_row_is_zeros_not_nan():
    s = np.array([[[1.0, 2.0], [3.0, 4.0]]])
    mask = np.array([[True, True], [False, True]])
    w = steps.softmax(s, mask)
    assert w[0, 0].tolist() == [0.0, 0.0]
    assert w[0, 1].tolist() == [1.0, 0.0]


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 4), st.integers(1, 200), st.integers(0, 10**6))
def test_blocked_causal_softmax_equals_the_reference_softmax(heads, n, seed):
    s = np.random.default_rng(seed).normal(size=(heads, n, n)) * 10
    np.testing.assert_allclose(fused.causal_softmax(s, block=16), steps.softmax(s, steps.causal_mask(n)), atol=1e-15)


def test_causal_softmax_on_a_large_input_equals_the_reference_softmax():
    s = np.random.default_rng(0).normal(size=(5, 600, 600))  # many blocks, a ragged last one
    np.testing.assert_allclose(fused.causal_softmax(s), steps.softmax(s, steps.causal_mask(600)), atol=1e-15)


def test_blocked_causal_attend_equals_a_full_matmul():
    rng = np.random.default_rng(1)
    w = np.tril(rng.random(size=(3, 130, 130)))
    v = rng.normal(size=(3, 130, 4))
    np.testing.assert_allclose(steps.attend(w, v, causal=True), w @ v, atol=1e-12)


def test_softmax_without_the_shift_when_scores_are_bounded_equals_the_shifted_one():
    s = np.random.default_rng(3).uniform(-fused.EXP_SAFE, fused.EXP_SAFE, size=(2, 300, 300))
    shifted = fused.causal_softmax(s)
    unshifted = fused.causal_softmax(s, bounded=True)
    np.testing.assert_allclose(unshifted, shifted, rtol=1e-13, atol=1e-300)  # 1e-300: both underflow to ~0
    future = np.broadcast_to(steps.causal_mask(300), s.shape)
    assert not unshifted[future].any() and not shifted[future].any()  # the future exactly 0 in both
    np.testing.assert_allclose(unshifted.sum(axis=-1), 1.0, atol=1e-13)


@pytest.mark.parametrize("causal", [True, False])
def test_attention_heads_gives_the_same_bits_on_one_thread_or_many(monkeypatch, causal):
    rng = np.random.default_rng(4)
    q, k, v = (rng.normal(size=(6, 300, 16)) for _ in range(3))
    spread = fused.attention_heads(q, k, v, 0.25, causal, bound=100.0)  # 540,000 score cells: over the cores
    monkeypatch.setattr(parallel, "PARALLEL_CELLS", 10**12)
    threadpoolctl = pytest.importorskip("threadpoolctl")
    with threadpoolctl.threadpool_limits(1, user_api="blas"):  # OpenBLAS rounds differently on more threads
        alone = fused.attention_heads(q, k, v, 0.25, causal, bound=100.0)
    for a, b in zip(spread, alone, strict=True):
        assert np.array_equal(a, b)


def test_a_parallel_section_gives_blas_its_threads_back():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    before = [lib["num_threads"] for lib in threadpoolctl.threadpool_info() if lib["user_api"] == "blas"]
    seen: list[list[int]] = []

    def look(group: slice) -> None:
        seen.append([lib["num_threads"] for lib in threadpoolctl.threadpool_info() if lib["user_api"] == "blas"])

    parallel.over_heads(look, heads=4, cells=parallel.PARALLEL_CELLS)
    after = [lib["num_threads"] for lib in threadpoolctl.threadpool_info() if lib["user_api"] == "blas"]
    assert after == before
    if parallel.cores() > 1:
        assert all(threads == [1] * len(before) for threads in seen)  # one BLAS thread per head group meanwhile
