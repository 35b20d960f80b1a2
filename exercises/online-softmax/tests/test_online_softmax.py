"""Your online_attention against the softmax taken whole. When a test fails, its message names the slip
(of the three this exercise knows) that gives your numbers.

Run: pytest exercises/online-softmax/tests   (ONLINE_EXERCISE=path/to/yours.py to test another file)
"""

import warnings

import numpy as np
import pytest
from slips import named, plain, which

RNG = np.random.default_rng(2023)


def answer(online_attention, q, k, v, block_q, block_k, causal):
    """(output, lse) as your function returns them, checked for shape."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)  # 0/0 in a row that saw nothing: reported below
        got = online_attention(q, k, v, block_q, block_k, causal=causal)
    assert isinstance(got, tuple) and len(got) == 2, "online_attention must return (output, lse)"
    output, lse = (np.asarray(a, dtype=float) for a in got)
    n, d_v = len(q), np.shape(v)[1]
    assert output.shape == (n, d_v), f"output has shape {list(output.shape)}; it must be [n, d_v] = {[n, d_v]}"
    assert lse.shape == (n,), f"lse has shape {list(lse.shape)}; it must be [n] = {[n]}"
    return output, lse


def same_as_the_softmax(online_attention, q, k, v, block_q, block_k, causal, what):
    output, lse = answer(online_attention, q, k, v, block_q, block_k, causal)
    want, want_lse = plain(q, k, v, causal)
    where = f"{what} (n = {len(q)}, block_q = {block_q}, block_k = {block_k}, causal = {causal})"
    if np.isnan(output).any() or not np.allclose(output, want, atol=1e-9, rtol=0):
        found = which(output, q, k, v, block_q, block_k, causal)
        nan = (
            f" Row {int(np.argwhere(np.isnan(output))[0][0]) + 1} is NaN: it saw no key."
            if np.isnan(output).any()
            else ""
        )
        diff = np.abs(output - want)[~np.isnan(output)]
        by = f"by up to {diff.max():.3g}" if diff.size else "in every row"
        pytest.fail(
            f"{where}: the output differs from the softmax {by}.{nan} What went wrong: {named(found)}.", pytrace=False
        )
    if not np.allclose(lse, want_lse, atol=1e-9, rtol=0):
        why = (
            f" What went wrong: {named(('online_max_not_carried',))}." if np.isneginf(lse).any() else ""
        )  # m still -inf after the loop: it was never set to m_new
        pytest.fail(
            f"{where}: the output is right but lse is not each row's log-sum-exp L = m + log l (off by up to "
            f"{np.max(np.abs(lse - want_lse)):.3g}).{why}",
            pytrace=False,
        )


def test_one_tile_holding_every_score_is_the_plain_softmax(online_attention):
    q, k, v = RNG.normal(size=(3, 5, 4))
    same_as_the_softmax(online_attention, q, k, v, 5, 5, False, "One tile without a mask")


def test_the_running_maximum_is_carried_from_tile_to_tile(online_attention):
    """Every row's largest score is in the first key block: nothing needs rescaling, but what the first
    tiles added must survive the later ones."""
    q = RNG.normal(size=(6, 4))
    k = RNG.normal(size=(6, 4)) * 0.1
    k[0] = q.sum(axis=0) * 3  # key 1 scores highest for every query
    v = RNG.normal(size=(6, 3))
    same_as_the_softmax(online_attention, q, k, v, 6, 2, False, "The maximum is in the first tile")


def test_the_sums_are_rescaled_when_the_maximum_rises(online_attention):
    """Each key block scores higher than the one before, for every row: each tile raises the maximum."""
    q = np.abs(RNG.normal(size=(4, 4))) + 0.5
    k = np.repeat(np.arange(1, 5)[:, None] * np.ones((1, 4)), 2, axis=0) * 0.8  # [8, 4] rising by block
    v = RNG.normal(size=(8, 3))
    q8 = np.vstack([q, q])
    same_as_the_softmax(online_attention, q8, k, v, 8, 2, False, "The maximum rises in every tile")


def test_the_diagonal_tile_is_computed_under_the_causal_mask(online_attention):
    """One tile holds the whole causal score matrix: it is the diagonal, masked inside, never skipped."""
    q, k, v = RNG.normal(size=(3, 4, 4))
    same_as_the_softmax(online_attention, q, k, v, 4, 4, True, "One causal tile on the diagonal")


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "unmasked"])
def test_every_block_size_gives_the_softmax(online_attention, causal):
    q, k, v = RNG.normal(size=(3, 7, 4))
    for block_q in range(1, 8):
        for block_k in range(1, 8):
            same_as_the_softmax(online_attention, q, k, v, block_q, block_k, causal, "Random scores")


def test_large_scores_do_not_overflow(online_attention):
    """Scores near 1,000: exp(1000) overflows a float64; exp(s - m) never does."""
    q, k, v = RNG.normal(size=(3, 6, 4))
    same_as_the_softmax(online_attention, q * 40, k * 40, v, 2, 3, True, "Scores in the hundreds")


def test_tiles_in_the_future_are_never_computed(online_attention):
    """Under the causal mask with n = T x B and square blocks, T(T+1)/2 tiles are computed: the tiles
    above the diagonal hold only future keys, and the point of tiling is not to compute them."""
    q, k, v = RNG.normal(size=(3, 8, 4))
    computed = []
    online_attention(q, k, v, 2, 2, causal=True, record=lambda i, j, *values: computed.append((i, j)))
    future = [(i + 1, j + 1) for i, j in computed if j > i]
    assert not future, f"tiles above the diagonal were computed (query block, key block): {future}"
    missing = sorted({(i, j) for i in range(4) for j in range(i + 1)} - set(computed))
    if missing and all(i == j for i, j in missing):
        pytest.fail(
            f"the tiles on the diagonal were not computed. What went wrong: {named(('online_diagonal_skipped',))}.",
            pytrace=False,
        )
    assert not missing, (
        f"tiles that hold keys a query sees were not recorded (query block, key block): "
        f"{[(i + 1, j + 1) for i, j in missing]} (call record(query_block, key_block, m, alpha, l, o) after each tile)"
    )
