"""`multi_head_attention`: the whole pipeline, every intermediate kept in an `AttentionTrace`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from . import ops
from .checks import as_matrix, as_weight, check_scores, finite, scores_bound
from .config import AttentionConfig, RopeConfig
from .failure_modes import Steps, steps


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
    query_before_rope: np.ndarray | None = None  # [H, n, d_head] with RoPE on: Q_h before its rotation
    key_before_rope: np.ndarray | None = None  # [H, n, d_head] with RoPE on: K_h before its rotation

    @property
    def d_head(self) -> int:
        return self.config.d_head

    @property
    def feature_ranges(self) -> list[tuple[int, int] | None]:
        """Each head's features as [start, end) when contiguous, else None."""
        rows = self.features.tolist()  # a few heads of a few features: plain lists beat numpy calls
        return [(row[0], row[0] + len(row)) if row == list(range(row[0], row[0] + len(row))) else None for row in rows]


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
    # Overflow is detected by explicit checks (with the place it happened), not warnings.
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        x = as_matrix(x, "tokens")
        shape = (x.shape[0], x.shape[1], heads, heads if kv_heads is None else kv_heads)
        cfg = _config(*shape, bool(causal), RopeConfig.coerce(rope), failure_mode)
        return _pipeline(x, cfg, Projections.of(cfg, w_q, w_k, w_v, w_o), steps(failure_mode))


def _config(n, d_model, heads, kv_heads, causal, rope, failure_mode) -> AttentionConfig:
    """The call's validated config; the same switches give the same (immutable) config."""
    try:
        return _known_config(n, d_model, heads, kv_heads, causal, rope, failure_mode)
    except TypeError:  # an unhashable argument: validation says what is wrong with it
        return AttentionConfig(n, d_model, heads, kv_heads, causal, rope, failure_mode)


@lru_cache(maxsize=1024, typed=True)  # typed: heads=True is not heads=1, validation sees each
def _known_config(n, d_model, heads, kv_heads, causal, rope, failure_mode) -> AttentionConfig:
    return AttentionConfig(n, d_model, heads, kv_heads, causal, rope, failure_mode)


def with_mistakes(x, heads: int, causal: bool, *mistakes: str | None, w_o=None) -> AttentionTrace:
    """What code making every one of `mistakes` computes (any mix, one per step; the checker's
    slips included), with Q = K = V = X as in the exercise."""
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        x = as_matrix(x, "tokens")
        cfg = AttentionConfig(n=x.shape[0], d_model=x.shape[1], heads=heads, kv_heads=heads, causal=bool(causal))
        return _pipeline(x, cfg, Projections.of(cfg, None, None, None, w_o), steps(*mistakes))


@dataclass(frozen=True)
class Projections:
    """W_Q, W_K, W_V, W_O as `[in][out]` float64 arrays, or None for the identity."""

    query: np.ndarray | None
    key: np.ndarray | None
    value: np.ndarray | None
    output: np.ndarray | None

    @classmethod
    def of(cls, cfg: AttentionConfig, w_q, w_k, w_v, w_o) -> Projections:
        d, kv = cfg.d_model, cfg.kv_width
        return cls(
            as_weight(w_q, (d, d), "projections.query"),
            as_weight(w_k, (d, kv), "projections.key"),
            as_weight(w_v, (d, kv), "projections.value"),
            as_weight(w_o, (d, d), "projections.output"),
        )


def _pipeline(x: np.ndarray, cfg: AttentionConfig, w: Projections, how: Steps) -> AttentionTrace:
    """The ten steps of the contract (docs/conventions.md), one line each; `how` says how a
    broken implementation does the steps it gets wrong (failure_modes.py)."""
    q, k, v = _project(x, w, cfg.kv_width)  # 1. [n, d_model] -> [n, d_model], [n, kv*d_head], [n, kv*d_head]
    features, kv_features = head_features(cfg, how.split)  # which features each head reads
    qh, kh, vh = _split_all((q, k, v), features, kv_features, how.split)  # 2. -> [H|kv, n, d_head]
    plain = (qh, ops.repeat_kv(kh, cfg.group_size)) if cfg.rope is not None else (None, None)  # kept to show
    qh, kh = _rope(qh, cfg.rope), _rope(kh, cfg.rope)  # 3. rotate by position (RoPE only)
    kh, vh = ops.repeat_kv(kh, cfg.group_size), ops.repeat_kv(vh, cfg.group_size)  # [kv, n, d] -> [H, n, d]
    mask = ops.causal_mask(cfg.n) if cfg.causal else np.zeros((cfg.n, cfg.n), dtype=bool)  # 5. [n, n] future
    masking, scale = _masking(how.mask, cfg.causal), _SCALES[how.scale](cfg)
    masks = cfg.causal and cfg.n > 1  # a causal mask over one position masks nothing
    scores, weights, head_outputs = _attend(qh, kh, vh, scale, mask, masking, masks)  # 4-7. [H, n, n] x2, [H, n, d]
    concat = ops.merge_heads(head_outputs[::-1] if how.order == "reversed" else head_outputs)  # 8. [n, d_model]
    output = concat if how.output == "skip" else _out(concat, w.output)  # 9. concat @ W_O: [n, d_model]
    residual = finite(x + output, "the residual X + output", "tokens")  # 10. X + output: [n, d_model]
    kv_head = _kv_head(cfg.heads, cfg.group_size, how.split)  # [H]
    for array in (x, qh, kh, vh, scores, weights, head_outputs, concat, output, residual, *plain):
        if array is not None:
            array.setflags(write=False)  # the mask, features and kv heads are shared and already are
    return AttentionTrace(
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
        query_before_rope=plain[0],
        key_before_rope=plain[1],
    )


def _project(x: np.ndarray, w: Projections, kv_width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Q, K, V; identity projections of finite tokens are finite, so only real matmuls are checked."""
    q = finite(ops.project(x, w.query), "the query projection X @ W_Q", "projections.query", w.query)
    k = finite(ops.project(x, w.key, kv_width), "the key projection X @ W_K", "projections.key", w.key)
    v = finite(ops.project(x, w.value, kv_width), "the value projection X @ W_V", "projections.value", w.value)
    return q, k, v


def _split_all(
    qkv: tuple[np.ndarray, np.ndarray, np.ndarray], features: np.ndarray, kv_features: np.ndarray, split: str
):
    """Split Q, K and V; the same matrix split the same way (identity projections) is split once."""
    q, k, v = qkv
    qh = _split(q, features, split)
    kh = qh if k is q and kv_features is features else _split(k, kv_features, split)
    return qh, kh, kh if v is k else _split(v, kv_features, split)


def _split(m: np.ndarray, features: np.ndarray, split: str) -> np.ndarray:
    """[n, heads*d_head] -> [heads, n, d_head]: a reshape when the slices are contiguous, else a gather."""
    if split == "contiguous":
        return ops.split_heads(m, features.shape[0])
    return ops.gather_heads(m, features)


def _rope(m: np.ndarray, rope: RopeConfig | None) -> np.ndarray:
    return m if rope is None else ops.rope(m, rope.style, rope.base)


def _attend(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, mask: np.ndarray, masking: str, masks: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """4. scores Q_h K_h^T * scale [H, n, n]; 5-6. mask and softmax [H, n, n]; 7. weights @ V_h [H, n, d_head].

    Done right on more than one block of rows, the three run a block at a time (ops.attention_heads);
    a small input or a broken masking runs them as whole-array steps, in fewer numpy calls.
    `masks`: whether `mask` masks any cell (a causal mask over more than one position)."""
    bound = scores_bound(q, k, scale)
    if masking == "before_softmax" and q.shape[1] > ops.ROW_BLOCK:
        scores, weights, head_outputs = ops.attention_heads(q, k, v, scale, masks, bound)
        check_scores(scores, bound)
        return scores, weights, head_outputs
    scores = ops.scores(q, k, scale)  # [H, n, d] @ [H, d, n] -> [H, n, n]
    check_scores(scores, bound)
    weights = _NORMALISE[masking](scores, mask)  # [H, n, n]
    return scores, weights, ops.attend(weights, v, causal=_lower_triangular(masking, masks))


def _out(concat: np.ndarray, w_o: np.ndarray | None) -> np.ndarray:
    return finite(ops.project(concat, w_o), "the output projection concat @ W_O", "projections.output", w_o)


_SCALES = {
    "d_head": lambda cfg: 1.0 / math.sqrt(cfg.d_head),
    "none": lambda cfg: 1.0,
    "d_model": lambda cfg: 1.0 / math.sqrt(cfg.d_model),
}


def _masking(mask: str, causal: bool) -> str:
    """Without a causal mask only the softmax's axis (or a transposition) can still go wrong."""
    return mask if causal or mask in ("wrong_axis", "transposed") else "before_softmax"


def _lower_triangular(mask: str, causal: bool) -> bool:
    """The weights are zero above the diagonal, so `attend` may skip those blocks."""
    return causal and mask in ("before_softmax", "after_softmax", "diagonal")


def _softmax_then_mask(s: np.ndarray, mask: np.ndarray) -> np.ndarray:
    weights = ops.softmax(s)  # every position, future included
    weights[:, mask] = 0.0  # rows no longer sum to 1
    return weights


_NORMALISE = {
    "before_softmax": ops.mask_then_softmax,
    "after_softmax": _softmax_then_mask,
    "none": lambda s, mask: ops.softmax(s),
    "diagonal": lambda s, mask: ops.softmax(s, mask | np.eye(mask.shape[0], dtype=bool)),  # row 1 sees nothing: 0s
    "zero": lambda s, mask: ops.softmax(np.where(mask, 0.0, s)),
    "wrong_axis": lambda s, mask: np.swapaxes(ops.softmax(np.swapaxes(s, -1, -2), mask.T), -1, -2),
    "transposed": lambda s, mask: np.swapaxes(ops.mask_then_softmax(s, mask), -1, -2).copy(),
}


def head_features(cfg: AttentionConfig, split: str = "contiguous") -> tuple[np.ndarray, np.ndarray]:
    """Feature index per query head `[H, d_head]` and per kv head `[kv_heads, d_head]` (read-only)."""
    return _layouts(cfg.heads, cfg.kv_heads, cfg.d_head, split)


@lru_cache(maxsize=256)
def _layouts(heads: int, kv_heads: int, d_head: int, split: str) -> tuple[np.ndarray, np.ndarray]:
    """The same shapes always read the same features: made once, shared read-only."""
    if split == "first":
        layout = lambda count: np.tile(np.arange(d_head), (count, 1))  # noqa: E731
    elif split == "interleaved":
        layout = lambda count: ops.interleaved_features(count, d_head)  # noqa: E731
    else:
        layout = lambda count: ops.contiguous_features(count, d_head)  # noqa: E731
    features = layout(heads)
    kv_features = features if kv_heads == heads else layout(kv_heads)  # one array when alike
    for array in (features, kv_features):
        array.setflags(write=False)
    return features, kv_features


@lru_cache(maxsize=256)
def _kv_head(heads: int, group_size: int, split: str) -> np.ndarray:
    """The kv head each query head uses (read-only, shared)."""
    kv_head = np.zeros(heads, dtype=np.int64) if split == "first" else np.arange(heads) // group_size
    kv_head.setflags(write=False)
    return kv_head
