"""The pipeline's ten steps, in the order docs/conventions.md numbers them, each a small pure
function (numpy only, row vectors), and `run`, which does them in that order. `how` (a failure
mode's Steps) says how a broken implementation does the steps it gets wrong; large inputs done
right take the fused, row-blocked kernels (fused.py) for steps 4 to 7. Every number in and out
is checked finite (the checks at the end: an error names the input at fault, `tokens`,
`projections.query`, `biases.key`, `rope`, `latent.down`, ..., and the first bad cell, counting from
1; the plain spec, reference.py, names the same inputs). pipeline.py runs the steps in order.

Shapes: n positions, d_model model width, H heads, d_head = d_model / H.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .errors import AttentionInputError
from .fused import ROW_BLOCK, causal_mask, causal_softmax  # noqa: F401  (causal_mask: step 5, from the kernels)

# 1. project: Q = X W_Q, K = X W_K, V = X W_V


def project(x: np.ndarray, w: np.ndarray | None, width: int | None = None, b: np.ndarray | None = None) -> np.ndarray:
    """Row-vector projection `x @ w (+ b)`; `w=None` is the identity (its first `width` columns)."""
    if w is None:
        y = x if width is None or width == x.shape[1] else x[:, :width]  # [n, d_model] -> [n, width]
    else:
        y = dot(x, w)  # [n, d_in] @ [d_in, d_out] -> [n, d_out]
    return y if b is None else y + b  # [n, d_out] + [d_out]


# Up to this many multiply-adds a product is summed in one fixed order (einsum) rather than by BLAS,
# whose kernels round by the shape they are given: a decode step's [1, L] row then equals its row of
# the full pass bit for bit, where BLAS differed by an ulp (the KV cache page shows max difference 0).
EXACT_PRODUCTS = 1 << 16


def dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`a @ b` (batched over leading axes): summed in one order when small, by BLAS when large."""
    if a.size * b.shape[-1] * (b.shape[0] if b.ndim > a.ndim else 1) <= EXACT_PRODUCTS:
        return np.einsum("...ik,...kj->...ij", a, b)
    return np.matmul(a, b)


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


# 3. RoPE: rotate Q_h and K_h by position (rope.py)


# 4. scores: S_h = Q_h K_h^T / sqrt(d_head)


def scores(q: np.ndarray, k: np.ndarray, scale: float) -> np.ndarray:
    """Scaled dot products; the scale is folded into q (n*d multiplies instead of n*n)."""
    return dot(q * scale, k.transpose(0, 2, 1))  # [H, n, d] @ [H, d, n] -> [H, n, n]


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


def mask_then_softmax(s: np.ndarray, mask: np.ndarray, square: bool = True) -> np.ndarray:
    """Steps 5-6 done right: hidden cells -inf, then the softmax. The full pass's square causal mask
    (`square`) past one block of rows goes in row blocks, and every row keeps its diagonal; a block
    of queries over a cache may hold a row that sees nothing (all zeros)."""
    if not mask.any():
        return softmax(s)
    if square and s.shape[-1] > ROW_BLOCK:
        return causal_softmax(s)
    return softmax(s, mask, rows_see=square)


def _softmax_then_mask(s: np.ndarray, mask: np.ndarray, square: bool = True) -> np.ndarray:
    weights = softmax(s)  # every position, future included
    weights[:, mask] = 0.0  # rows no longer sum to 1
    return weights


@dataclass(frozen=True)
class Way:
    """A way of doing steps 5-6 (failure_modes.Recipe.mask): how it turns scores [H, m, L] into weights given
    the hidden cells [m, L], whether it applies its mask even where no causal mask is asked for (a mask
    misplaced, not left out), and whether its weights stay zero above the diagonal (the mix may skip those)."""

    weights: Callable[[np.ndarray, np.ndarray, bool], np.ndarray]
    misplaced: bool = False
    lower: bool = False


# The ways after the first two are the checker's slips, of a full pass.
NORMALISE = {
    "before_softmax": Way(mask_then_softmax, lower=True),
    "after_softmax": Way(_softmax_then_mask, lower=True),
    "none": Way(lambda s, mask, square: softmax(s)),
    "diagonal": Way(lambda s, mask, square: softmax(s, mask | np.eye(mask.shape[0], dtype=bool)), lower=True),
    "zero": Way(lambda s, mask, square: softmax(np.where(mask, 0.0, s))),
    "wrong_axis": Way(lambda s, mask, square: np.swapaxes(softmax(np.swapaxes(s, -1, -2), mask.T), -1, -2), True),
    "transposed": Way(lambda s, mask, square: np.swapaxes(mask_then_softmax(s, mask), -1, -2).copy(), True),
}


def way_of(mask: str, causal: bool) -> str:
    """How steps 5-6 are done: as the recipe's `mask` says, or without a causal mask the plain softmax,
    unless that way misplaces the mask rather than leaving it out."""
    return mask if causal or NORMALISE[mask].misplaced else "before_softmax"


def scores_field(w) -> str:
    """The input an overflow in the scores is named after: the projection that made the queries, else the tokens."""
    return "projections.query" if w.query is not None else "projections.key" if w.key is not None else "tokens"


# 7. mix: O_h = A_h V_h


def attend(weights: np.ndarray, v: np.ndarray, causal: bool = False, block: int = ROW_BLOCK) -> np.ndarray:
    """Mix values by the weights; under a causal mask skip the all-zero upper blocks."""
    heads, n, _ = weights.shape
    if not causal or n <= block:
        return dot(weights, v)  # [H, n, n] @ [H, n, d] -> [H, n, d]
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


# Checks: every number in, and every number out, is finite

SAFE_BOUND = 1e300  # any |score| bound below this cannot have overflowed on the way (float64 max 1.8e308)
SCAN_DIRECTLY = 4096  # cells below which a direct scan beats computing a bound


def as_matrix(value, field: str) -> np.ndarray:
    """A finite 2-D float64 array (a copy: the trace freezes it), or an error naming the field and the cell."""
    try:
        raw = np.asarray(value)
    except ValueError as exc:  # ragged nesting
        raise AttentionInputError(f"{field} must be a rectangular matrix of numbers ({exc})", field=field) from None
    if raw.dtype.kind not in "iuf":
        raise AttentionInputError(
            f"{field} must be a rectangular matrix of numbers, got elements of type {raw.dtype}", field=field
        )
    if raw.ndim != 2 or 0 in raw.shape:
        raise AttentionInputError(f"{field} must be a non-empty 2-D matrix, got shape {list(raw.shape)}", field=field)
    matrix = np.array(raw, dtype=np.float64)
    if not all_finite(matrix):
        i, j = (int(a) for a in np.argwhere(~np.isfinite(matrix))[0])
        raise AttentionInputError(
            f"{field} row {i + 1}, column {j + 1} (counting from 1) is {matrix[i, j]}; every number must be finite",
            field=field,
        )
    return matrix


def as_weight(value, shape: tuple[int, int], field: str) -> np.ndarray | None:
    if value is None:
        return None
    w = as_matrix(value, field)
    if w.shape != shape:
        raise AttentionInputError(
            f"{field} must have shape [{shape[0]}][{shape[1]}] (d_in x d_out, row vectors), "
            f"got [{w.shape[0]}][{w.shape[1]}]",
            field=field,
        )
    return w


def as_bias(value, width: int, field: str) -> np.ndarray | None:
    if value is None:
        return None
    b = np.asarray(value, dtype=np.float64).reshape(-1) if np.ndim(value) == 1 else as_matrix(value, field)
    if b.ndim != 1 or b.shape[0] != width or not np.isfinite(b).all():
        raise AttentionInputError(f"{field} must be {width} finite numbers (one per output column)", field=field)
    return b.copy()


def finite(a: np.ndarray, what: str, field: str, weight: object = True) -> np.ndarray:
    """`a`, or an error naming the step, the input at fault and the first cell that overflowed
    (1-based: row and column, and the head of a [H, n, d] array); the identity (`weight` None) of
    finite input is finite, so it is not scanned."""
    if weight is not None and not all_finite(a):
        where = [int(t) + 1 for t in np.argwhere(~np.isfinite(a))[0]]
        place = f"row {where[-2]}, column {where[-1]}" if len(where) > 1 else f"position {where[0]}"
        head = f"in head {where[0]} at " if len(where) == 3 else "at "
        raise AttentionInputError(
            f"{what} overflowed float64 {head}{place} (counting from 1); the inputs are too large to compute",
            field=field,
        )
    return a


def scores_bound(q: np.ndarray, k: np.ndarray, scale: float) -> float:
    """An upper bound on every |score| (Cauchy-Schwarz: |q_i . k_j| <= |q_i| |k_j|), or inf when
    the scores are few: scanning them is cheaper than bounding."""
    if q.shape[0] * q.shape[1] * k.shape[1] <= SCAN_DIRECTLY:
        return np.inf
    with np.errstate(over="ignore"):
        q_norm = np.sqrt(np.einsum("hnd,hnd->hn", q, q).max())
        bound = scale * q_norm * (q_norm if k is q else np.sqrt(np.einsum("hnd,hnd->hn", k, k).max()))
    return float(bound) if np.isfinite(bound) else np.inf


def check_scores(s: np.ndarray, bound: float, field: str = "tokens") -> None:
    """A full scan only when the bound does not already prove every score finite; `field` is the
    input that made the queries and keys (the query projection when there is one, else the tokens)."""
    if bound < SAFE_BOUND or all_finite(s):
        return
    h, i, j = (int(t) for t in np.argwhere(~np.isfinite(s))[0])
    raise AttentionInputError(
        f"scores overflowed float64 in head {h + 1} at query {i + 1}, key {j + 1} (counting from 1); "
        "the inputs or projections are too large to compute",
        field=field,
    )


def all_finite(a: np.ndarray) -> bool:
    """No inf or NaN in `a`. A finite sum proves it in one pass without a temporary (inf and NaN
    propagate); only a sum that overflowed needs the cell-by-cell look."""
    if a.size <= SCAN_DIRECTLY:  # small: the plain scan, without the error-state context's cost
        return bool(np.isfinite(a).all())
    with np.errstate(over="ignore", invalid="ignore"):
        return bool(np.isfinite(np.add.reduce(a, axis=None))) or bool(np.isfinite(a).all())
