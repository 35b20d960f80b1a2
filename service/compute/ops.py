"""The stages of multi-head attention, one small pure function each (numpy only, row vectors).

Shapes use n = positions, d_model = model width, H = heads, d_head = d_model / H.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

# Rows per block in the causal kernels: a [H, 64, n] slab stays in cache.
ROW_BLOCK = 64


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


def softmax(s: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """Row softmax, stable (row max subtracted); masked cells are exactly 0.

    A row with every cell masked gives all-zero weights, never NaN (as PyTorch SDPA).
    """
    z = s.copy() if mask is None else np.where(mask, -np.inf, s)  # [.., n, n]
    row_max = z.max(axis=-1, keepdims=True)  # [.., n, 1]
    empty = ~np.isfinite(row_max)
    if empty.any():
        row_max[empty] = 0.0
    z -= row_max
    np.exp(z, out=z)
    total = z.sum(axis=-1, keepdims=True)  # [.., n, 1]
    if empty.any():
        total[empty] = 1.0  # the row is all zeros already
    z /= total
    return z


def causal_softmax(s: np.ndarray, block: int = ROW_BLOCK) -> np.ndarray:
    """`softmax(s, causal_mask(n))`, computed in row blocks that skip the all-masked columns.

    Rows [r0, r1) can only see keys [0, r1): everything right of that is exactly 0 and is
    never exponentiated, and only the diagonal block holds masked cells. Those are set to 0
    before `exp` and zeroed after it: numpy's vectorised `exp` falls back to a slow path for
    every vector holding -inf (three times slower over the diagonal blocks). Same numbers as
    the reference `softmax` (to rounding), about half the work.
    """
    heads, n, _ = s.shape
    w = np.empty_like(s)  # [H, n, n], every cell written below
    future = np.where(causal_mask(block), -np.inf, 0.0)  # [block, block] additive -inf triangle
    ahead = causal_mask(block)  # [block, block] True in the future
    for r0 in range(0, n, block):
        r1 = min(n, r0 + block)
        tri, masked = future[: r1 - r0, : r1 - r0], ahead[: r1 - r0, : r1 - r0]  # [rows, rows]
        row_max = (s[:, r0:r1, r0:r1] + tri).max(axis=-1, keepdims=True)  # [H, rows, 1], diagonal visible
        if r0:
            np.maximum(row_max, s[:, r0:r1, :r0].max(axis=-1, keepdims=True), out=row_max)
        z = w[:, r0:r1, :r1]  # [H, rows, r1] view into the result
        np.subtract(s[:, r0:r1, :r1], row_max, out=z)
        np.copyto(z[:, :, r0:r1], 0.0, where=masked)  # future cells 0: exp(0) is on the fast path
        np.exp(z, out=z)
        np.copyto(z[:, :, r0:r1], 0.0, where=masked)  # and now exactly 0
        z *= 1.0 / z.sum(axis=-1, keepdims=True)
        w[:, r0:r1, r1:] = 0.0
    return w


def attend(weights: np.ndarray, v: np.ndarray, causal: bool = False, block: int = ROW_BLOCK) -> np.ndarray:
    """Mix values by the weights; under a causal mask skip the all-zero upper blocks."""
    if not causal:
        return np.matmul(weights, v)  # [H, n, n] @ [H, n, d] -> [H, n, d]
    heads, n, _ = weights.shape
    out = np.empty((heads, n, v.shape[-1]))  # [H, n, d]
    for r0 in range(0, n, block):
        r1 = min(n, r0 + block)
        np.matmul(weights[:, r0:r1, :r1], v[:, :r1], out=out[:, r0:r1])  # [H, rows, r1] @ [H, r1, d]
    return out
