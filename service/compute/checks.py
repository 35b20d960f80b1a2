"""Every number in, and every number out, is finite: the engine's checks. An error names the input
at fault (`tokens`, `projections.query`, `biases.key`, `rope`, `latent.down`, ...) and the first bad
cell, counting from 1; the plain spec (reference.py) names the same inputs.
"""

from __future__ import annotations

import numpy as np

from .errors import AttentionInputError

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
