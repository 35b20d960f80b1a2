"""The online softmax: attention computed a tile at a time, never holding the n x n weights.

Fill in `online_attention` so that it returns exactly softmax(q k^T / sqrt(d)) v and each row's
log-sum-exp, walking the scores in tiles of `block_q` query rows by `block_k` keys (FlashAttention-2,
Dao 2023, Algorithm 1). This starter runs, and gets three things wrong: the tests name each one.

Shapes: q [n, d], k [n, d], v [n, d_v]; a tile is [block_q, block_k] scores.
"""

import numpy as np


def online_attention(q, k, v, block_q, block_k, causal=True, record=None):
    """Return (output [n, d_v], lse [n]).

    Under `causal`, query i sees keys 0..i. For each block of query rows, walk the key blocks in order,
    carrying per row the running maximum m, the running sum l and the unnormalised output o. After
    every tile you compute, call record(query_block, key_block, m, alpha, l, o) with the rows' values
    (`trace.py` uses it to show your numbers beside the correct ones; the tests do not need it).
    """
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    n, scale = q.shape[0], 1 / np.sqrt(q.shape[1])
    output, lse = np.zeros((n, v.shape[1])), np.zeros(n)
    for i, r0 in enumerate(range(0, n, block_q)):
        r1 = min(r0 + block_q, n)
        m = np.full(r1 - r0, -np.inf)  # the running maximum of each row
        l = np.zeros(r1 - r0)  # noqa: E741 (the paper's name) the running sum of exp(s - m)
        o = np.zeros((r1 - r0, v.shape[1]))  # the unnormalised output
        for j, c0 in enumerate(range(0, n, block_k)):
            c1 = min(c0 + block_k, n)
            if causal and c1 - 1 > r0:  # a tile whose keys come after its queries: not computed
                continue
            s = q[r0:r1] @ k[c0:c1].T * scale  # [block_q, block_k]
            if causal:
                rows, cols = np.arange(r0, r1)[:, None], np.arange(c0, c1)[None, :]
                s = np.where(cols > rows, -np.inf, s)  # the causal mask inside the tile
            m_new = np.maximum(m, s.max(axis=1))
            alpha = np.exp(m - m_new)  # what the rows' sums so far are worth at the new maximum
            p = np.exp(s - m_new[:, None])
            l = l + p.sum(axis=1)  # noqa: E741
            o = o + p @ v[c0:c1]
            if record is not None:
                record(i, j, m_new, alpha, l, o)
        output[r0:r1] = o / l[:, None]
        lse[r0:r1] = m + np.log(l)
    return output, lse
