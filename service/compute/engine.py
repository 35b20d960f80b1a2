"""`multi_head_attention`: the whole pipeline, every intermediate kept in an `AttentionTrace`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import ops
from .config import AttentionConfig, RopeConfig
from .errors import AttentionInputError

# Any |score| bound below this cannot have overflowed on the way (float64 max is 1.8e308).
_SAFE_BOUND = 1e300
_SCAN_DIRECTLY = 4096  # score cells below which a direct scan beats computing the bound


@dataclass(frozen=True, eq=False)
class AttentionTrace:
    """Everything one call computed, float64, read-only arrays.

    query/key/value are what each query head used: after RoPE, and under grouped-query
    attention the key/value head shared by that query head.
    """

    config: AttentionConfig
    tokens: np.ndarray  # [n, d_model]
    query: np.ndarray  # [H, n, d_head]
    key: np.ndarray  # [H, n, d_head]
    value: np.ndarray  # [H, n, d_head]
    scores: np.ndarray  # [H, n, n] scaled, before masking
    mask: np.ndarray  # [n, n] True where masked
    weights: np.ndarray  # [H, n, n]
    head_outputs: np.ndarray  # [H, n, d_head]
    concat: np.ndarray  # [n, d_model]
    output: np.ndarray  # [n, d_model] after W_O
    residual: np.ndarray  # [n, d_model] tokens + output
    features: np.ndarray  # [H, d_head] which projected query features each head read
    kv_features: np.ndarray  # [kv_heads, d_head] which projected key/value features each kv head read
    kv_head: np.ndarray  # [H] the kv head each query head used

    @property
    def d_head(self) -> int:
        return self.config.d_head

    @property
    def feature_ranges(self) -> list[tuple[int, int] | None]:
        """Each head's features as [start, end) when contiguous, else None."""
        ranges: list[tuple[int, int] | None] = []
        for row in self.features:
            start = int(row[0])
            contiguous = bool(np.array_equal(row, np.arange(start, start + len(row))))
            ranges.append((start, start + len(row)) if contiguous else None)
        return ranges


def multi_head_attention(
    x,
    heads: int,
    *,
    causal: bool = True,
    w_q=None,
    w_k=None,
    w_v=None,
    w_o=None,
    kv_heads: int | None = None,
    rope: RopeConfig | dict | str | None = None,
    failure_mode: str | None = None,
) -> AttentionTrace:
    """Causal (by default) multi-head attention of token rows `x` `[n][d_model]`, float64.

    Weights are `[in][out]` (row vectors: `Q = X @ W_Q`); None means identity. Under
    grouped-query attention `w_k`/`w_v` are `[d_model][kv_heads * d_head]`. `failure_mode`
    computes exactly what the named broken implementation would.
    """
    # Overflow is detected by explicit checks below (with the place it happened), not warnings.
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        return _compute(x, heads, causal, w_q, w_k, w_v, w_o, kv_heads, rope, failure_mode)


def _compute(x, heads, causal, w_q, w_k, w_v, w_o, kv_heads, rope, failure_mode) -> AttentionTrace:
    x = as_matrix(x, "tokens")
    n, d_model = x.shape
    cfg = AttentionConfig(
        n=n,
        d_model=d_model,
        heads=heads,
        kv_heads=heads if kv_heads is None else kv_heads,
        causal=bool(causal),
        rope=RopeConfig.coerce(rope),
        failure_mode=failure_mode,
    )
    w_q = as_weight(w_q, (d_model, d_model), "projections.query")
    w_k = as_weight(w_k, (d_model, cfg.kv_width), "projections.key")
    w_v = as_weight(w_v, (d_model, cfg.kv_width), "projections.value")
    w_o = as_weight(w_o, (d_model, d_model), "projections.output")

    # Identity projections of finite tokens are finite: only real matmuls are checked.
    q = _finite(ops.project(x, w_q), "the query projection X @ W_Q", w_q)  # [n, d_model]
    k = _finite(ops.project(x, w_k, cfg.kv_width), "the key projection X @ W_K", w_k)  # [n, kv*d_head]
    v = _finite(ops.project(x, w_v, cfg.kv_width), "the value projection X @ W_V", w_v)  # [n, kv*d_head]

    features, kv_features = head_features(cfg)
    if cfg.failure_mode in ("reuse_first_slice", "interleaved_split"):
        qh = ops.gather_heads(q, features)  # [n, d_model] -> [H, n, d_head]
        kh = ops.gather_heads(k, kv_features)  # [n, kv*d_head] -> [kv, n, d_head]
        vh = ops.gather_heads(v, kv_features)  # [n, kv*d_head] -> [kv, n, d_head]
    else:
        qh = ops.split_heads(q, cfg.heads)  # [n, d_model] -> [H, n, d_head]
        kh = ops.split_heads(k, cfg.kv_heads)  # [n, kv*d_head] -> [kv, n, d_head]
        vh = ops.split_heads(v, cfg.kv_heads)  # [n, kv*d_head] -> [kv, n, d_head]
    if cfg.rope is not None:
        qh = ops.rope(qh, cfg.rope.style, cfg.rope.base)
        kh = ops.rope(kh, cfg.rope.style, cfg.rope.base)
    kh = ops.repeat_kv(kh, cfg.group_size)  # [kv, n, d] -> [H, n, d]
    vh = ops.repeat_kv(vh, cfg.group_size)  # [kv, n, d] -> [H, n, d]

    scores = ops.scores(qh, kh, cfg.scale)  # [H, n, n]
    _check_scores(scores, qh, kh, cfg.scale)
    mask = ops.causal_mask(n) if cfg.causal else np.zeros((n, n), dtype=bool)  # [n, n]
    if cfg.failure_mode == "mask_after_softmax":
        weights = ops.softmax(scores)  # every position, future included
        weights[:, mask] = 0.0  # rows no longer sum to 1
    elif cfg.causal:
        weights = ops.causal_softmax(scores)  # [H, n, n], future weights exactly 0
    else:
        weights = ops.softmax(scores)  # [H, n, n]

    head_outputs = ops.attend(weights, vh, causal=cfg.causal)  # [H, n, n] @ [H, n, d] -> [H, n, d]
    ordered = head_outputs[::-1] if cfg.failure_mode == "swapped_head_order" else head_outputs
    concat = ops.merge_heads(ordered)  # [H, n, d] -> [n, d_model]
    if cfg.failure_mode == "no_output_projection":
        output = concat
    else:
        output = _finite(ops.project(concat, w_o), "the output projection concat @ W_O", w_o)  # [n, d_model]
    residual = _finite(x + output, "the residual X + output")  # [n, d_model]

    kv_head = np.arange(cfg.heads) // cfg.group_size  # [H]
    if cfg.failure_mode == "reuse_first_slice":
        kv_head = np.zeros(cfg.heads, dtype=np.int64)
    return _frozen(
        AttentionTrace(
            config=cfg,
            tokens=x,
            query=qh,
            key=kh,
            value=vh,
            scores=scores,
            mask=mask,
            weights=weights,
            head_outputs=head_outputs,
            concat=concat,
            output=output,
            residual=residual,
            features=features,
            kv_features=kv_features,
            kv_head=kv_head,
        )
    )


def head_features(cfg: AttentionConfig) -> tuple[np.ndarray, np.ndarray]:
    """Feature index per query head `[H, d_head]` and per kv head `[kv_heads, d_head]`."""
    mode = cfg.failure_mode
    if mode == "reuse_first_slice":
        first = np.arange(cfg.d_head)
        return np.tile(first, (cfg.heads, 1)), np.tile(first, (cfg.kv_heads, 1))
    if mode == "interleaved_split":
        return ops.interleaved_features(cfg.heads, cfg.d_head), ops.interleaved_features(cfg.kv_heads, cfg.d_head)
    return ops.contiguous_features(cfg.heads, cfg.d_head), ops.contiguous_features(cfg.kv_heads, cfg.d_head)


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
    bad = ~np.isfinite(matrix)
    if bad.any():
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


def _finite(a: np.ndarray, what: str, weight: object = True) -> np.ndarray:
    if weight is not None and not np.isfinite(a).all():
        i, j = (int(t) for t in np.argwhere(~np.isfinite(a))[0])
        raise AttentionInputError(
            f"{what} overflowed float64 at row {i + 1}, column {j + 1} (counting from 1); "
            "the inputs are too large to compute",
            field="tokens",
        )
    return a


def _check_scores(scores: np.ndarray, q: np.ndarray, k: np.ndarray, scale: float) -> None:
    """Cauchy-Schwarz bounds |q_i . k_j| by |q_i| |k_j|: a full scan only when that bound is huge."""
    if scores.size <= _SCAN_DIRECTLY:
        bound = np.inf  # small: scanning is cheaper than bounding
    else:
        bound = _norm_bound(q, k, scale)
    if bound < _SAFE_BOUND:
        return
    bad = ~np.isfinite(scores)
    if bad.any():
        h, i, j = (int(t) for t in np.argwhere(bad)[0])
        raise AttentionInputError(
            f"scores overflowed float64 in head {h + 1} at query {i + 1}, key {j + 1} (counting from 1); "
            "the inputs or projections are too large to compute",
            field="tokens",
        )


def _norm_bound(q: np.ndarray, k: np.ndarray, scale: float) -> float:
    with np.errstate(over="ignore"):
        bound = scale * np.sqrt(np.einsum("hnd,hnd->hn", q, q).max()) * np.sqrt(np.einsum("hnd,hnd->hn", k, k).max())
    return float(bound) if np.isfinite(bound) else np.inf


def _frozen(trace: AttentionTrace) -> AttentionTrace:
    for value in vars(trace).values():
        if isinstance(value, np.ndarray):
            value.flags.writeable = False
    return trace
