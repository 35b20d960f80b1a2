"""The fast kernels for large inputs: scores, the causal softmax and the mix of values done a
block of query rows at a time (each block's scores and weights still in cache for the next step),
skipping what the causal mask makes exactly zero, and spreading heads over the cores
(parallel.py). The same numbers as the whole-array steps of steps.py, to rounding; tests keep
them together and both equal to the plain spec (reference.py)."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from . import parallel

# Rows per block: one head's [128, n] block stays in cache, and BLAS works well on that many rows
# (64 was 10% slower in the scores matmul, 256 lost cache).
ROW_BLOCK = 128
# |score| at most this: exp neither overflows (709) nor underflows to subnormals (-708), no shift needed.
EXP_SAFE = 600.0


@lru_cache(maxsize=64)
def causal_mask(n: int) -> np.ndarray:
    """Step 5's mask: True where query i may not see key j (j > i), top-left aligned. Shared, read-only."""
    mask = np.triu(np.ones((n, n), dtype=bool), k=1)  # [n, n]
    mask.flags.writeable = False
    return mask


def causal_softmax(s: np.ndarray, block: int = ROW_BLOCK, bounded: bool = False) -> np.ndarray:
    """`softmax(s, causal_mask(n))`, computed in row blocks that skip the all-masked columns
    (softmax_rows). Same numbers as the reference `softmax` (to rounding), about half the work."""
    w = np.empty_like(s)  # [H, n, n], every cell written below
    for r0 in range(0, s.shape[-2], block):
        softmax_rows(s, w, r0, min(s.shape[-2], r0 + block), True, bounded)
    return w


def softmax_rows(s: np.ndarray, w: np.ndarray, r0: int, r1: int, causal: bool, bounded: bool) -> None:
    """Rows [r0, r1) of the softmax of `s` [H, n, n] into `w`, under the causal mask or none.

    Causal rows [r0, r1) can only see keys [0, r1): everything right of that is exactly 0 and
    is never exponentiated, and only the diagonal block holds masked cells. Those are set to 0
    before `exp` and zeroed after it: numpy's vectorised `exp` falls back to a slow path for
    every vector holding -inf (three times slower over the diagonal blocks).

    `bounded` (every |score| <= EXP_SAFE, as a norm bound proves) skips subtracting the row
    maximum: exp can neither overflow nor leave a row all zero, and softmax does not change
    under a shift, so the weights are the same to rounding for two fewer passes over memory.
    """
    seen = r1 if causal else s.shape[-1]
    masked = causal_mask(r1 - r0) if causal else None  # [rows, rows] True in the future
    z = w[:, r0:r1, :seen]  # [H, rows, seen] view into the result
    if bounded:
        np.exp(s[:, r0:r1, :seen], out=z)
    else:
        np.subtract(s[:, r0:r1, :seen], _row_max(s, r0, r1, masked), out=z)
        if masked is not None:
            np.copyto(z[:, :, r0:r1], 0.0, where=masked)  # future cells 0: exp(0) is on the fast path
        np.exp(z, out=z)
    if masked is not None:
        np.copyto(z[:, :, r0:r1], 0.0, where=masked)  # and now exactly 0
        w[:, r0:r1, r1:] = 0.0
    z *= 1.0 / z.sum(axis=-1, keepdims=True)


def _row_max(s: np.ndarray, r0: int, r1: int, masked: np.ndarray | None) -> np.ndarray:
    """The largest visible score of rows [r0, r1): causal, keys left of the block and the diagonal's lower triangle."""
    if masked is None:
        return s[:, r0:r1].max(axis=-1, keepdims=True)  # [H, rows, 1]
    row_max = np.where(masked, -np.inf, s[:, r0:r1, r0:r1]).max(axis=-1, keepdims=True)  # [H, rows, 1]
    if r0:
        np.maximum(row_max, s[:, r0:r1, :r0].max(axis=-1, keepdims=True), out=row_max)
    return row_max


def attention_heads(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, causal: bool, bound: float = np.inf
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Steps 4-7 done right, a block of query rows at a time: scores, mask then softmax, mix values.

    The same operations as `scores`, `mask_then_softmax` and `attend`, so the same numbers (to
    rounding), but each block's scores and weights are still in cache for the next step; large
    inputs go a head at a time and spread the heads over the cores (parallel.over_heads).
    `bound`: a proven upper bound on every |score| (steps.scores_bound).
    """
    heads, n, _ = q.shape
    s = np.empty((heads, n, n))  # [H, n, n] scaled scores
    w = np.empty_like(s)  # [H, n, n] weights
    out = np.empty((heads, n, v.shape[-1]))  # [H, n, d_head]
    per_pass = 1 if n > ROW_BLOCK else heads  # a large head's blocks fit in cache; small ones go together

    def run(group: slice) -> None:
        for h0 in range(group.start, group.stop, per_pass):
            hs = slice(h0, min(group.stop, h0 + per_pass))
            q_scaled, k_t = q[hs] * scale, k[hs].transpose(0, 2, 1)  # [h, n, d], [h, d, n]
            for r0 in range(0, n, ROW_BLOCK):
                r1 = min(n, r0 + ROW_BLOCK)
                seen = r1 if causal else n  # keys rows [r0, r1) may see
                np.matmul(q_scaled[:, r0:r1], k_t, out=s[hs, r0:r1])  # [h, rows, d] @ [h, d, n] -> [h, rows, n]
                softmax_rows(s[hs], w[hs], r0, r1, causal, bound <= EXP_SAFE)  # [h, rows, n]
                np.matmul(w[hs, r0:r1, :seen], v[hs, :seen], out=out[hs, r0:r1])  # [h, rows, seen] @ [h, seen, d]

    parallel.over_heads(run, heads, heads * n * n)
    return s, w, out
