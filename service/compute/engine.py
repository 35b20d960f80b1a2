"""`multi_head_attention`: the whole pipeline, every intermediate kept in an `AttentionTrace`."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from . import latent as mla
from . import pipeline, steps
from .checks import as_bias, as_matrix, as_weight
from .config import AttentionConfig, LatentShape, RopeConfig
from .errors import AttentionInputError
from .failure_modes import Steps, steps_of
from .reference import plain_loop


@dataclass(frozen=True, eq=False)
class AttentionTrace:
    """Everything one call computed, float64, read-only arrays.

    query/key/value are what each query head used: after RoPE, and under grouped-query
    attention the key/value head shared by that query head. Under latent attention (latent.py)
    each head's query and key are [content | decoupled RoPE part]; in the absorbed form K and V are
    never made (None) and the head's query in latent space and its mix of the latent are kept.
    """

    config: AttentionConfig
    tokens: np.ndarray  # [n, d_model]
    query: np.ndarray  # [H, n, d_head (+ d_rope)]
    key: np.ndarray | None  # [H, n, d_head (+ d_rope)]; None in the absorbed latent form
    value: np.ndarray | None  # [H, n, d_head]; None in the absorbed latent form
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
    latent: np.ndarray | None = None  # [n, d_c] latent attention: C = X W_DKV, what a cache keeps
    rope_key: np.ndarray | None = None  # [n, d_rope] latent attention's decoupled RoPE key, shared by every head
    latent_query: np.ndarray | None = None  # [H, n, d_c] absorbed: each head's content query times W_UK,h^T
    latent_output: np.ndarray | None = None  # [H, n, d_c] absorbed: each head's weights times C, before W_UV,h

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
    b_q=None,
    b_k=None,
    b_v=None,
    b_o=None,
    kv_heads: int | None = None,
    rope: RopeConfig | dict | str | None = None,
    latent: mla.LatentWeights | dict | None = None,
    failure_mode: str | None = None,
    reference: bool = False,
) -> AttentionTrace:
    """Causal (by default) multi-head attention of token rows `x` `[n][d_model]`, float64.

    Weights are `[in][out]` (row vectors: `Q = X @ W_Q`); None means identity. Biases `b_q`,
    `b_k`, `b_v`, `b_o` `[out]` are added after their projection (`Q = X @ W_Q + b_Q`, BERT's
    layers have them); None means none. Under grouped-query attention `w_k`/`w_v` are
    `[d_model][kv_heads * d_head]`. `latent` (`{down, up_key, up_value, rope_key?, rope_query?,
    absorbed?}`) makes keys and values from a latent, DeepSeek-V2's multi-head latent attention
    (latent.py); `rope` then turns only its decoupled parts. `failure_mode` computes exactly what the
    named broken implementation would (one that only decoding can make is computed by decoding,
    decode.py, and its rows laid out as one pass). `reference` computes it with the plain per-head
    loop that specifies the engine (reference.py) instead of its fast kernels.
    """
    # Overflow is detected by explicit checks (with the place it happened), not warnings.
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        x, cfg, w = prepare(x, heads, causal, (w_q, w_k, w_v, w_o), (b_q, b_k, b_v, b_o), kv_heads, rope, latent,
                            failure_mode)  # fmt: skip
        if cfg.steps.decoding:
            from .decode import decode  # decode builds on this module

            return decode(x, cfg, w).as_pass()
        return _pipeline(x, cfg, w, cfg.steps, reference)


def prepare(x, heads, causal, weights, biases, kv_heads, rope, latent, failure_mode):
    """The call's tokens as a checked matrix, its validated config and its checked weights."""
    x = as_matrix(x, "tokens")
    lw = None if latent is None else mla.weights(latent, x.shape[1], heads)
    rope_cfg = None if rope is None else RopeConfig.coerce(rope)
    if lw is not None and lw.d_rope and rope_cfg is None:
        rope_cfg = RopeConfig()  # the decoupled RoPE parts turn "half" (GPT-NeoX style) at base 10000 unless told
    shape = None if lw is None else LatentShape(lw.d_c, lw.d_rope, lw.absorbed)
    cfg = _config(x.shape[0], x.shape[1], heads, heads if kv_heads is None else kv_heads, bool(causal), rope_cfg,
                  failure_mode, shape)  # fmt: skip
    if lw is not None and (weights[1] is not None or weights[2] is not None):
        part = "key" if weights[1] is not None else "value"
        raise AttentionInputError(
            "latent attention makes keys and values from the latent (latent.up_key, latent.up_value): "
            f"leave projections.{part} out",
            field=f"projections.{part}",
        )
    w_q, w_k, w_v, w_o = weights
    return x, cfg, Projections.of(cfg, w_q, w_k, w_v, w_o, biases, latent=lw)


def _config(n, d_model, heads, kv_heads, causal, rope, failure_mode, latent=None) -> AttentionConfig:
    """The call's validated config; the same switches give the same (immutable) config."""
    try:
        return _known_config(n, d_model, heads, kv_heads, causal, rope, failure_mode, latent)
    except TypeError:  # an unhashable argument: validation says what is wrong with it
        return AttentionConfig(n, d_model, heads, kv_heads, causal, rope, failure_mode, latent)


@lru_cache(maxsize=1024, typed=True)  # typed: heads=True is not heads=1, validation sees each
def _known_config(n, d_model, heads, kv_heads, causal, rope, failure_mode, latent) -> AttentionConfig:
    return AttentionConfig(n, d_model, heads, kv_heads, causal, rope, failure_mode, latent)


def with_mistakes(x, heads: int, causal: bool, *mistakes: str | None, w_o=None) -> AttentionTrace:
    """What code making every one of `mistakes` computes (any mix, one per step; the checker's
    slips included), with Q = K = V = X as in the exercise."""
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        x = as_matrix(x, "tokens")
        cfg = AttentionConfig(n=x.shape[0], d_model=x.shape[1], heads=heads, kv_heads=heads, causal=bool(causal))
        return _pipeline(x, cfg, Projections.of(cfg, None, None, None, w_o), steps_of(*mistakes), False)


@dataclass(frozen=True)
class Projections:
    """W_Q, W_K, W_V, W_O as `[in][out]` float64 arrays, or None for the identity; each one's
    bias `[out]`, or None for none."""

    query: np.ndarray | None
    key: np.ndarray | None
    value: np.ndarray | None
    output: np.ndarray | None
    biases: tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None, np.ndarray | None] = (None,) * 4
    latent: mla.LatentWeights | None = None  # latent attention's weights (keys and values come from them)

    @classmethod
    def of(cls, cfg: AttentionConfig, w_q, w_k, w_v, w_o, biases=(None,) * 4, latent=None) -> Projections:
        nothing = w_q is None and w_k is None and w_v is None and w_o is None and all(b is None for b in biases)
        if nothing and latent is None:
            return IDENTITY  # the workbench's case: nothing to check
        d, kv = cfg.d_model, cfg.kv_width
        widths = (d, kv, kv, d)
        names = ("query", "key", "value", "output")
        return cls(
            as_weight(w_q, (d, d), "projections.query"),
            as_weight(w_k, (d, kv), "projections.key"),
            as_weight(w_v, (d, kv), "projections.value"),
            as_weight(w_o, (d, d), "projections.output"),
            tuple(as_bias(b, width, f"biases.{name}") for b, width, name in zip(biases, widths, names, strict=True)),  # type: ignore[arg-type]
            latent,
        )


IDENTITY = Projections(None, None, None, None)


def _pipeline(x: np.ndarray, cfg: AttentionConfig, w: Projections, how: Steps, reference: bool) -> AttentionTrace:
    """The ten steps (docs/conventions.md), by the fast kernels (steps.py) or, with `reference`,
    by the plain per-head loop that is their spec (reference.py): the same numbers to rounding."""
    features, kv_features = _layouts(cfg.heads, cfg.kv_heads, cfg.d_head, how.split)  # which features each head reads
    parts = (plain_loop if reference else pipeline.run)(x, cfg, w, how, features, kv_features)
    for array in (x, *parts.values()):
        if array is not None:
            array.setflags(write=False)  # the mask, features and kv heads are shared and already are
    return AttentionTrace(
        config=cfg,
        tokens=x,
        features=features,
        kv_features=kv_features,
        kv_head=kv_heads_of(cfg, how),
        **parts,
    )


def head_features(cfg: AttentionConfig, split: str = "contiguous") -> tuple[np.ndarray, np.ndarray]:
    """Feature index per query head `[H, d_head]` and per kv head `[kv_heads, d_head]` (read-only)."""
    return _layouts(cfg.heads, cfg.kv_heads, cfg.d_head, split)


@lru_cache(maxsize=256)
def _layouts(heads: int, kv_heads: int, d_head: int, split: str) -> tuple[np.ndarray, np.ndarray]:
    """The same shapes always read the same features: made once, shared read-only."""
    if split == "first":
        layout = lambda count: np.tile(np.arange(d_head), (count, 1))  # noqa: E731
    elif split == "interleaved":
        layout = lambda count: steps.interleaved_features(count, d_head)  # noqa: E731
    else:
        layout = lambda count: steps.contiguous_features(count, d_head)  # noqa: E731
    features = layout(heads)
    kv_features = features if kv_heads == heads else layout(kv_heads)  # one array when alike
    for array in (features, kv_features):
        array.setflags(write=False)
    return features, kv_features


def kv_heads_of(cfg: AttentionConfig, how: Steps) -> np.ndarray:
    """The kv head each query head reads under `how` [H] (read-only, shared)."""
    return _kv_head(cfg.heads, cfg.group_size, how.split, how.kv_order)


@lru_cache(maxsize=256)
def _kv_head(heads: int, group_size: int, split: str, order: str = "repeat") -> np.ndarray:
    """The kv head each query head uses (read-only, shared)."""
    kv_head = np.zeros(heads, dtype=np.int64) if split == "first" else steps.kv_head_of(heads, group_size, order)
    kv_head.setflags(write=False)
    return kv_head
