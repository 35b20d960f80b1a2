"""Input and overflow checks of the engine: every number in, and every number out, is finite.

An error names the input at fault (`field`) and the first bad cell, counting from 1.
"""

from __future__ import annotations

import numpy as np

from .errors import AttentionInputError

# Any |score| bound below this cannot have overflowed on the way (float64 max is 1.8e308).
_SAFE_BOUND = 1e300


_SCAN_DIRECTLY = 4096  # score cells below which a direct scan beats computing the bound


def as_matrix(value, field: str) -> np.ndarray:
    """A finite 2-D float64 array, or an AttentionInputError naming the field and the cell."""
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
    matrix = np.array(raw, dtype=np.float64)  # always a copy: the trace freezes it
    if not all_finite(matrix):
        bad = ~np.isfinite(matrix)
        i, j = (int(a) for a in np.argwhere(bad)[0])
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


def finite(a: np.ndarray, what: str, field: str, weight: object = True) -> np.ndarray:
    """`a`, or an error naming the step and the first cell that overflowed (1-based)."""
    if weight is not None and not all_finite(a):
        i, j = (int(t) for t in np.argwhere(~np.isfinite(a))[0])
        raise AttentionInputError(
            f"{what} overflowed float64 at row {i + 1}, column {j + 1} (counting from 1); "
            "the inputs are too large to compute",
            field=field,
        )
    return a


def scores_bound(q: np.ndarray, k: np.ndarray, scale: float) -> float:
    """An upper bound on every |score| (Cauchy-Schwarz), or inf when the scores are few: scanning
    them is cheaper than bounding."""
    return np.inf if q.shape[0] * q.shape[1] * k.shape[1] <= _SCAN_DIRECTLY else norm_bound(q, k, scale)


def check_scores(scores: np.ndarray, bound: float) -> None:
    """Cauchy-Schwarz bounds |q_i . k_j| by |q_i| |k_j|: a full scan only when that bound is huge."""
    if bound < _SAFE_BOUND or all_finite(scores):
        return
    h, i, j = (int(t) for t in np.argwhere(~np.isfinite(scores))[0])
    raise AttentionInputError(
        f"scores overflowed float64 in head {h + 1} at query {i + 1}, key {j + 1} (counting from 1); "
        "the inputs or projections are too large to compute",
        field="tokens",
    )


def all_finite(a: np.ndarray) -> bool:
    """No inf or NaN in `a`. A finite sum proves it in one pass without a temporary (inf and NaN
    propagate); only a sum that overflowed needs the cell-by-cell look."""
    if a.size <= _SCAN_DIRECTLY:  # small: the plain scan, without the error-state context's cost
        return bool(np.isfinite(a).all())
    with np.errstate(over="ignore", invalid="ignore"):
        return bool(np.isfinite(np.add.reduce(a, axis=None))) or bool(np.isfinite(a).all())


def norm_bound(q: np.ndarray, k: np.ndarray, scale: float) -> float:
    def largest_norm(m: np.ndarray) -> float:
        return np.sqrt(np.einsum("hnd,hnd->hn", m, m).max())

    with np.errstate(over="ignore"):
        q_norm = largest_norm(q)
        bound = scale * q_norm * (q_norm if k is q else largest_norm(k))
    return float(bound) if np.isfinite(bound) else np.inf
