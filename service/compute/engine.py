"""`multi_head_attention`: the whole pipeline, every intermediate kept in an `AttentionTrace`."""

from __future__ import annotations

import numpy as np

from . import latent as mla
from . import pipeline
from .config import AttentionConfig
from .errors import AttentionInputError
from .failure_modes import Recipe, recipe_of
from .inputs import head_features, kv_heads_of, layout, prepare
from .masks import Reach
from .reference import plain_loop
from .rope import RopeConfig
from .steps import as_matrix
from .trace import AttentionTrace
from .weights import IDENTITY, Projections

__all__ = [
    "IDENTITY",
    "AttentionTrace",
    "Projections",
    "attention_pass",
    "head_features",
    "multi_head_attention",
    "with_mistakes",
]


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
    reach: Reach | dict | None = None,
) -> AttentionTrace:
    """Causal (by default) multi-head attention of token rows `x` `[n][d_model]`, float64.

    Weights are `[in][out]` (row vectors: `Q = X @ W_Q`); None means identity. Biases `b_q`,
    `b_k`, `b_v`, `b_o` `[out]` are added after their projection (`Q = X @ W_Q + b_Q`, BERT's
    layers have them); None means none. Under grouped-query attention `w_k`/`w_v` are
    `[d_model][kv_heads * d_head]`. `latent` (`{down, up_key, up_value, rope_key?, rope_query?,
    absorbed?}`) makes keys and values from a latent, DeepSeek-V2's multi-head latent attention
    (latent.py); `rope` then turns only its decoupled parts. `failure_mode` computes exactly what the
    named broken implementation would (one that only decoding with a cache can make, and StreamingLLM's
    `positions`, are a decode's: `decode.one_pass` lays it out as one pass). `reference` computes it with
    the plain per-head loop that specifies the engine (reference.py) instead of its fast kernels. `reach` (masks.Reach,
    or a mapping of its fields): a sliding `window` W (query i sees key j when i - W < j <= i), `sinks`
    S (the first S positions stay visible beside it), a `sink_logit` per head (joins each row's softmax
    denominator only: rows sum to less than one, gpt-oss), and `positions="cache"` (the text decoded
    with a rolling cache whose keys RoPE turns by their place in it, StreamingLLM: a decode's).
    """
    # Overflow is detected by explicit checks (with the place it happened), not warnings.
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        weights, biases = (w_q, w_k, w_v, w_o), (b_q, b_k, b_v, b_o)
        x, cfg, w = prepare(x, heads, causal, weights, biases, kv_heads, rope, latent, failure_mode, reach)
        if cfg.decoding:
            raise DecodeOnly(x, cfg, w)
        return attention_pass(x, cfg, w, cfg.recipe, reference)


class DecodeOnly(AttentionInputError):
    """What only a decode with a KV cache computes (a decoding failure mode, StreamingLLM's positions),
    asked of the pass; `decode.one_pass`, which decodes it, takes the call's checked inputs from here."""

    def __init__(self, x: np.ndarray, cfg: AttentionConfig, w: Projections):
        super().__init__(
            "only a decode with a KV cache computes this (a decoding failure mode, or positions 'cache'): "
            "decode.one_pass lays that decode out as one pass, decode.decode_attention gives it step by step",
            field="failure_mode" if cfg.recipe.decoding else "positions",
        )
        self.x, self.cfg, self.w = x, cfg, w


def with_mistakes(x, heads: int, causal: bool, *mistakes: str | None, w_o=None) -> AttentionTrace:
    """What code making every one of `mistakes` computes (any mix, one per step; the checker's
    slips included), with Q = K = V = X as in the exercise."""
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        x = as_matrix(x, "tokens")
        cfg = AttentionConfig(n=x.shape[0], d_model=x.shape[1], heads=heads, kv_heads=heads, causal=bool(causal))
        w = Projections.of(cfg.d_model, cfg.kv_width, None, None, None, w_o)
        return attention_pass(x, cfg, w, recipe_of(*mistakes), False)


def attention_pass(x: np.ndarray, cfg: AttentionConfig, w: Projections, how: Recipe, reference: bool) -> AttentionTrace:
    """The ten steps (docs/conventions.md), by the fast kernels (steps.py) or, with `reference`,
    by the plain per-head loop that is their spec (reference.py): the same numbers to rounding."""
    features, kv_features, ranges = layout(cfg, how.split)  # which features each head reads
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
        feature_ranges=ranges,
        **parts,
    )
