"""The stages of multi-head attention, one small pure function each (numpy only, row vectors).

Shapes use n = positions, d_model = model width, H = heads, d_head = d_model / H.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from . import parallel

# Rows per block in the row-blocked kernels: one head's [128, n] block stays in cache, and BLAS
# works well on that many rows (64 was 10% slower in the scores matmul, 256 lost cache).
ROW_BLOCK = 128
# |score| at most this: exp neither overflows (709) nor underflows to subnormals (-708), no shift needed.
EXP_SAFE = 600.0


def project(x: np.ndarray, w: np.ndarray | None, width: int | None = None) -> np.ndarray:
    """Row-vector projection `x @ w`; `w=None` is the identity (its first `width` columns)."""
    if w is None:
        return x if width is None or width == x.shape[1] else x[:, :width]  # [n, d_model] -> [n, width]
    return x @ w  # [n, d_in] @ [d_in, d_out] -> [n, d_out]


def split_heads(x: np.ndarray, heads: int) -> np.ndarray:
    """Contiguous split: head h owns features [h*d_head, (h+1)*d_head)."""
    n, width = x.shape
    return np.ascontiguousarray(x.reshape(n, heads, width // heads).transpose(1, 0, 2))  # [n, H*d] -> [H, n, d]


def merge_heads(x: np.ndarray) -> np.ndarray:
    """Inverse of `split_heads`: concatenate head outputs in head order."""
    heads, n, d_head = x.shape
    return x.transpose(1, 0, 2).reshape(n, heads * d_head)  # [H, n, d] -> [n, H*d]


def contiguous_features(heads: int, d_head: int) -> np.ndarray:
    return np.arange(heads * d_head).reshape(heads, d_head)  # [H, d_head]


def interleaved_features(heads: int, d_head: int) -> np.ndarray:
    """The classic reshape bug: head h takes features h, h+H, h+2H, ..."""
    return np.arange(heads * d_head).reshape(d_head, heads).T.copy()  # [H, d_head]


def gather_heads(x: np.ndarray, features: np.ndarray) -> np.ndarray:
    """Split by an explicit feature index per head (any layout, slices may repeat)."""
    return np.ascontiguousarray(x[:, features].transpose(1, 0, 2))  # [n, width] -> [H, n, d_head]


def rope_angles(n: int, d_head: int, base: float) -> np.ndarray:
    inv_freq = base ** (-np.arange(0, d_head, 2, dtype=np.float64) / d_head)  # [d_head/2]
    return np.arange(n, dtype=np.float64)[:, None] * inv_freq[None, :]  # [n, d_head/2]


def rope(x: np.ndarray, style: str, base: float) -> np.ndarray:
    """Rotate each position's pairs by angle position * base^(-2i/d_head).

    "half" pairs feature i with i + d_head/2 (GPT-NeoX, Llama); "interleaved" pairs 2i with
    2i+1 (GPT-J, RoFormer). Same angles, different pairing, different numbers.
    """
    *_, n, d_head = x.shape
    theta = rope_angles(n, d_head, base)
    cos, sin = np.cos(theta), np.sin(theta)  # [n, d_head/2]
    if style == "half":
        x1, x2 = x[..., : d_head // 2], x[..., d_head // 2 :]
        return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)  # [.., n, d_head]
    out = np.empty_like(x)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    out[..., 0::2] = x1 * cos - x2 * sin
    out[..., 1::2] = x2 * cos + x1 * sin
    return out  # [.., n, d_head]


def repeat_kv(x: np.ndarray, group_size: int) -> np.ndarray:
    """Grouped-query attention: kv head j serves query heads j*g .. (j+1)*g - 1."""
    return x if group_size == 1 else np.repeat(x, group_size, axis=0)  # [kv, n, d] -> [H, n, d]


@lru_cache(maxsize=64)
def causal_mask(n: int) -> np.ndarray:
    """True where query i may not see key j (j > i): top-left aligned. Shared and read-only."""
    mask = np.triu(np.ones((n, n), dtype=bool), k=1)  # [n, n]
    mask.flags.writeable = False
    return mask


def scores(q: np.ndarray, k: np.ndarray, scale: float) -> np.ndarray:
    """Scaled dot products; the scale is folded into q (n*d multiplies instead of n*n)."""
    return np.matmul(q * scale, k.transpose(0, 2, 1))  # [H, n, d] @ [H, d, n] -> [H, n, n]


def softmax(s: np.ndarray, mask: np.ndarray | None = None, rows_see: bool = False) -> np.ndarray:
    """Row softmax, stable (row max subtracted); masked cells are exactly 0.

    A row with every cell masked gives all-zero weights, never NaN (as PyTorch SDPA).
    `rows_see`: the caller knows every row keeps a cell (a causal mask: the diagonal).
    """
    z = s.copy() if mask is None else np.where(mask, -np.inf, s)  # [.., n, n]
    row_max = z.max(axis=-1, keepdims=True)  # [.., n, 1]
    empty = None if mask is None or rows_see else ~np.isfinite(row_max)
    any_empty = empty is not None and bool(empty.any())  # only a mask can leave a row without a finite score
    if any_empty:
        row_max[empty] = 0.0
    z -= row_max
    np.exp(z, out=z)
    total = z.sum(axis=-1, keepdims=True)  # [.., n, 1]
    if any_empty:
        total[empty] = 1.0  # the row is all zeros already
    z /= total
    return z


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


def attend(weights: np.ndarray, v: np.ndarray, causal: bool = False, block: int = ROW_BLOCK) -> np.ndarray:
    """Mix values by the weights; under a causal mask skip the all-zero upper blocks."""
    heads, n, _ = weights.shape
    if not causal or n <= block:
        return np.matmul(weights, v)  # [H, n, n] @ [H, n, d] -> [H, n, d]
    out = np.empty((heads, n, v.shape[-1]))  # [H, n, d]
    for r0 in range(0, n, block):
        r1 = min(n, r0 + block)
        np.matmul(weights[:, r0:r1, :r1], v[:, :r1], out=out[:, r0:r1])  # [H, rows, r1] @ [H, r1, d]
    return out


def mask_then_softmax(s: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The correct step 5-6 under the causal mask (or none): future cells -inf, then softmax (row
    blocks when there is more than one). Every causal row sees its own position."""
    if not mask.any():
        return softmax(s)
    # Future weights exactly 0 either way; row blocks pay off once there is more than one.
    return causal_softmax(s) if s.shape[-1] > ROW_BLOCK else softmax(s, mask, rows_see=True)


def attention_heads(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, causal: bool, bound: float = np.inf
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Steps 4-7 done right, a block of query rows at a time: scores, mask then softmax, mix values.

    The same operations as `scores`, `mask_then_softmax` and `attend`, so the same numbers (to
    rounding), but each block's scores and weights are still in cache for the next step; large
    inputs go a head at a time and spread the heads over the cores (parallel.over_heads).
    `bound`: a proven upper bound on every |score| (checks.scores_bound).
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
