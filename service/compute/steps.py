"""The pipeline's ten steps, in the order docs/conventions.md numbers them, each a small pure
function (numpy only, row vectors), and `run`, which does them in that order. `how` (a failure
mode's Steps) says how a broken implementation does the steps it gets wrong; large inputs done
right take the fused, row-blocked kernels (fused.py) for steps 4 to 7. Every number in and out
is checked finite (checks.py). pipeline.py runs them in order.

Shapes: n positions, d_model model width, H heads, d_head = d_model / H.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .fused import ROW_BLOCK, causal_mask, causal_softmax  # noqa: F401  (causal_mask: step 5, from the kernels)

# 1. project: Q = X W_Q, K = X W_K, V = X W_V


def project(x: np.ndarray, w: np.ndarray | None, width: int | None = None, b: np.ndarray | None = None) -> np.ndarray:
    """Row-vector projection `x @ w (+ b)`; `w=None` is the identity (its first `width` columns)."""
    if w is None:
        y = x if width is None or width == x.shape[1] else x[:, :width]  # [n, d_model] -> [n, width]
    else:
        y = x @ w  # [n, d_in] @ [d_in, d_out] -> [n, d_out]
    return y if b is None else y + b  # [n, d_out] + [d_out]


# 2. split: head h takes its slice of the features


def split_heads(x: np.ndarray, heads: int) -> np.ndarray:
    """Contiguous split: head h owns features [h*d_head, (h+1)*d_head)."""
    n, width = x.shape
    return np.ascontiguousarray(x.reshape(n, heads, width // heads).transpose(1, 0, 2))  # [n, H*d] -> [H, n, d]


def merge_heads(x: np.ndarray) -> np.ndarray:
    """Inverse of `split_heads` (step 8): concatenate head outputs in head order."""
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


def repeat_kv(x: np.ndarray, group_size: int, order: str = "repeat") -> np.ndarray:
    """Grouped-query attention: kv head j serves query heads j*g .. (j+1)*g - 1 (PyTorch's
    `enable_gqa`, Llama's `repeat_kv`: repeat_interleave). `order="tile"` is the common bug:
    query head h reads kv head h % kv_heads (failure mode gqa_tiled)."""
    if group_size == 1:
        return x
    if order == "tile":
        return np.tile(x, (group_size, 1, 1))  # [kv, n, d] -> [H, n, d]: kv heads 0, 1, .., 0, 1, ..
    return np.repeat(x, group_size, axis=0)  # [kv, n, d] -> [H, n, d]: kv heads 0, 0, .., 1, 1, ..


def kv_head_of(heads: int, group_size: int, order: str = "repeat") -> np.ndarray:
    """The kv head each query head reads [H], as `repeat_kv` spreads them."""
    h = np.arange(heads)
    return h % (heads // group_size) if order == "tile" else h // group_size


# 3. RoPE: rotate Q_h and K_h by position


def rope(x: np.ndarray, style: str, base: float, positions: np.ndarray | None = None) -> np.ndarray:
    """Rotate each row's pairs by angle position * base^(-2i/d_head); row r is at `positions[r]`
    (by default its index: a decoded block passes where its rows are in the sequence).

    "half" pairs feature i with i + d_head/2 (GPT-NeoX, Llama); "interleaved" pairs 2i with
    2i+1 (GPT-J, RoFormer). Same angles, different pairing, different numbers.
    """
    *_, n, d_head = x.shape
    inv_freq = base ** (-np.arange(0, d_head, 2, dtype=np.float64) / d_head)  # [d_head/2]
    at = np.arange(n, dtype=np.float64) if positions is None else np.asarray(positions, dtype=np.float64)
    theta = at[:, None] * inv_freq[None, :]  # [n, d_head/2]
    cos, sin = np.cos(theta), np.sin(theta)
    if style == "half":
        x1, x2 = x[..., : d_head // 2], x[..., d_head // 2 :]
        return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)  # [.., n, d_head]
    out = np.empty_like(x)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    out[..., 0::2] = x1 * cos - x2 * sin
    out[..., 1::2] = x2 * cos + x1 * sin
    return out  # [.., n, d_head]


# 4. scores: S_h = Q_h K_h^T / sqrt(d_head)


def scores(q: np.ndarray, k: np.ndarray, scale: float) -> np.ndarray:
    """Scaled dot products; the scale is folded into q (n*d multiplies instead of n*n)."""
    return np.matmul(q * scale, k.transpose(0, 2, 1))  # [H, n, d] @ [H, d, n] -> [H, n, n]


# 5-6. mask (-inf before the softmax), then the row softmax


def softmax(s: np.ndarray, mask: np.ndarray | None = None, rows_see: bool = False) -> np.ndarray:
    """Row softmax, stable (row max subtracted); masked cells are exactly 0. A row with every cell
    masked gives all-zero weights, never NaN (as PyTorch SDPA). `rows_see`: the caller knows every
    row keeps a cell (a causal mask: the diagonal)."""
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


def mask_then_softmax(s: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Steps 5-6 done right: future cells -inf, then the softmax (in row blocks past one block)."""
    if not mask.any():
        return softmax(s)
    return causal_softmax(s) if s.shape[-1] > ROW_BLOCK else softmax(s, mask, rows_see=True)


def _softmax_then_mask(s: np.ndarray, mask: np.ndarray) -> np.ndarray:
    weights = softmax(s)  # every position, future included
    weights[:, mask] = 0.0  # rows no longer sum to 1
    return weights


# How each way of doing steps 5-6 turns scores into weights (failure_modes.Steps.mask).
NORMALISE = {
    "before_softmax": mask_then_softmax,
    "after_softmax": _softmax_then_mask,
    "none": lambda s, mask: softmax(s),
    "diagonal": lambda s, mask: softmax(s, mask | np.eye(mask.shape[0], dtype=bool)),  # row 1 sees nothing: 0s
    "zero": lambda s, mask: softmax(np.where(mask, 0.0, s)),
    "wrong_axis": lambda s, mask: np.swapaxes(softmax(np.swapaxes(s, -1, -2), mask.T), -1, -2),
    "transposed": lambda s, mask: np.swapaxes(mask_then_softmax(s, mask), -1, -2).copy(),
}


# 7. mix: O_h = A_h V_h


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


# What steps 1-3 give for some rows (pipeline.project_heads)


@dataclass(frozen=True)
class Heads:
    """Steps 1-3 for some rows of X: each query head's queries, and what a cache keeps of the
    same rows (keys and values per kv head, or under latent attention the latent and the RoPE key)."""

    query: np.ndarray  # [H, m, d_q] after RoPE
    cache: tuple[np.ndarray, np.ndarray]  # ([kv, m, d_k], [kv, m, d_v]), or latent ([m, d_c], [m, d_rope])
    query_before_rope: np.ndarray | None = None  # [H, m, d_q] with RoPE on
    key_before_rope: np.ndarray | None = None  # [kv, m, d_k] with RoPE on (None under latent attention)
