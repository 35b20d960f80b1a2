"""The exercise's own answers, for its tests and `trace.py`: the softmax taken whole (what the online
loop must equal), and the online loop written out with each of the three slips a learner can make,
so a wrong answer can be named by the slips that reproduce it.

Shapes: q [n, d], k [n, d], v [n, d_v].
"""

from __future__ import annotations

from itertools import combinations

import numpy as np

SLIPS = {
    "online_no_rescale": "the running sum l and output o were not rescaled when the maximum rose: multiply both by "
    "alpha = exp(m_old - m_new) before adding the tile's terms",
    "online_max_not_carried": "the running maximum m is not carried from tile to tile: after a tile, m must become "
    "m_new, or every later tile throws away what the earlier ones added",
    "online_diagonal_skipped": "a tile on the diagonal was skipped as if every key in it were in the future: skip a "
    "tile only when its first key comes after its last query, and mask the diagonal tile inside",
}


def plain(q, k, v, causal=True):
    """(softmax(q k^T / sqrt(d)) v [n, d_v], each row's log-sum-exp [n]), the whole score matrix at once."""
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    s = q @ k.T / np.sqrt(q.shape[1])
    if causal:
        s = np.where(np.triu(np.ones(s.shape, dtype=bool), 1), -np.inf, s)
    top = s.max(axis=1, keepdims=True)
    e = np.exp(s - top)
    return e @ v / e.sum(axis=1, keepdims=True), (top + np.log(e.sum(axis=1, keepdims=True)))[:, 0]


def tiled(q, k, v, block_q, block_k, causal=True, slips=(), record=None):
    """The online loop as code making `slips` computes it (none: right). A row that has seen no key yet
    holds m = -inf, l = 0, o = 0; one that sees none at all ends with output 0 and lse -inf."""
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    n, scale = q.shape[0], 1 / np.sqrt(q.shape[1])
    output, lse = np.zeros((n, v.shape[1])), np.full(n, -np.inf)
    for i, r0 in enumerate(range(0, n, block_q)):
        r1 = min(r0 + block_q, n)
        m = m_new = np.full(r1 - r0, -np.inf)
        total, o = np.zeros(r1 - r0), np.zeros((r1 - r0, v.shape[1]))
        for j, c0 in enumerate(range(0, n, block_k)):
            c1 = min(c0 + block_k, n)
            last_key_after_first_query = c1 - 1 > r0
            if causal and (c0 > r1 - 1 or ("online_diagonal_skipped" in slips and last_key_after_first_query)):
                continue
            s = q[r0:r1] @ k[c0:c1].T * scale
            if causal:
                s = np.where(np.arange(c0, c1)[None, :] > np.arange(r0, r1)[:, None], -np.inf, s)
            m_new = np.maximum(m, s.max(axis=1))
            shift = np.where(np.isfinite(m_new), m_new, 0.0)
            with np.errstate(invalid="ignore"):
                alpha = np.ones(r1 - r0) if "online_no_rescale" in slips else np.exp(m - shift)
            p = np.exp(s - shift[:, None])
            total, o = alpha * total + p.sum(axis=1), alpha[:, None] * o + p @ v[c0:c1]
            if "online_max_not_carried" not in slips:
                m = m_new
            if record is not None:
                record(i, j, m_new, alpha, total, o)
        seen = total > 0
        output[r0:r1] = np.where(seen[:, None], o / np.where(seen, total, 1.0)[:, None], 0.0)
        lse[r0:r1] = np.where(seen, m_new + np.log(np.where(seen, total, 1.0)), -np.inf)
    return output, lse


def which(output, q, k, v, block_q, block_k, causal=True, tolerance=1e-6) -> tuple[str, ...] | None:
    """The fewest slips whose loop reproduces `output` (NaN standing for a row that saw nothing);
    () when it is right, None when no combination of the three does."""
    got = np.nan_to_num(np.asarray(output, dtype=float), nan=0.0, posinf=0.0, neginf=0.0)
    for size in range(len(SLIPS) + 1):
        for slips in combinations(SLIPS, size):
            want, _ = tiled(q, k, v, block_q, block_k, causal, slips)
            if got.shape == want.shape and np.allclose(got, want, atol=tolerance, rtol=0):
                return slips
    return None


def named(slips: tuple[str, ...] | None) -> str:
    """What a learner reads about the slips `which` found."""
    if slips is None:
        return (
            "the numbers are not what any of the three known slips gives: compare your loop with a 2 x 2 case by hand"
        )
    if not slips:
        return "the output is right"
    return "; and ".join(SLIPS[s] for s in slips)
