"""A call's inputs, checked once: the tokens as a finite matrix, the validated configuration (cached:
the same switches give the same immutable config), the weights with their shapes checked, and which
features and key/value head each query head reads."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from . import latent as mla
from . import steps
from .config import AttentionConfig, LatentShape
from .errors import AttentionInputError
from .failure_modes import Recipe
from .masks import Reach
from .rope import RopeConfig
from .steps import as_matrix
from .weights import Projections


def prepare(x, heads, causal, weights, biases, kv_heads, rope, latent, failure_mode, reach=None):
    """The call's tokens as a checked matrix, its validated config and its checked weights; `reach`
    (masks.Reach, or a mapping of its fields) the long-context value, built here once."""
    x = as_matrix(x, "tokens")
    lw = None if latent is None else mla.weights(latent, x.shape[1], heads)
    rope_cfg = None if rope is None else RopeConfig.coerce(rope)
    if lw is not None and lw.d_rope and rope_cfg is None:
        rope_cfg = RopeConfig()  # the decoupled RoPE parts turn "half" (GPT-NeoX style) at base 10000 unless told
    shape = None if lw is None else LatentShape(lw.d_c, lw.d_rope, lw.absorbed)
    kv = heads if kv_heads is None else kv_heads
    cfg = _config(x.shape[0], x.shape[1], heads, kv, bool(causal), rope_cfg, failure_mode, shape, Reach.of(reach))
    if lw is not None and (weights[1] is not None or weights[2] is not None):
        part = "key" if weights[1] is not None else "value"
        raise AttentionInputError(
            "latent attention makes keys and values from the latent (latent.up_key, latent.up_value): "
            f"leave projections.{part} out",
            field=f"projections.{part}",
        )
    w_q, w_k, w_v, w_o = weights
    return x, cfg, Projections.of(cfg.d_model, cfg.kv_width, w_q, w_k, w_v, w_o, biases, latent=lw)


def _config(n, d_model, heads, kv_heads, causal, rope, failure_mode, latent, reach) -> AttentionConfig:
    """The call's validated config; the same switches give the same (immutable) config."""
    try:
        return _known_config(n, d_model, heads, kv_heads, causal, rope, failure_mode, latent, reach)
    except TypeError:  # an unhashable argument: validation says what is wrong with it
        return AttentionConfig(n, d_model, heads, kv_heads, causal, rope, failure_mode, latent, reach)


@lru_cache(maxsize=1024, typed=True)  # typed: heads=True is not heads=1, validation sees each
def _known_config(n, d_model, heads, kv_heads, causal, rope, failure_mode, latent, reach) -> AttentionConfig:
    return AttentionConfig(n, d_model, heads, kv_heads, causal, rope, failure_mode, latent, reach)


def head_features(cfg: AttentionConfig, split: str = "contiguous") -> tuple[np.ndarray, np.ndarray]:
    """Feature index per query head `[H, d_head]` and per kv head `[kv_heads, d_head]` (read-only)."""
    return _layouts(cfg.heads, cfg.kv_heads, cfg.d_head, split)[:2]


def layout(cfg: AttentionConfig, split: str) -> Layout:
    """`head_features`, and each head's features as [start, end) when contiguous, else None."""
    return _layouts(cfg.heads, cfg.kv_heads, cfg.d_head, split)


Layout = tuple[np.ndarray, np.ndarray, tuple[tuple[int, int] | None, ...]]


@lru_cache(maxsize=256)
def _layouts(heads: int, kv_heads: int, d_head: int, split: str) -> Layout:
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
    rows = features.tolist()
    ranges = tuple((row[0], row[0] + d_head) if row == list(range(row[0], row[0] + d_head)) else None for row in rows)
    return features, kv_features, ranges


def kv_heads_of(cfg: AttentionConfig, how: Recipe) -> np.ndarray:
    """The kv head each query head reads under `how` [H] (read-only, shared)."""
    return _kv_head(cfg.heads, cfg.group_size, how.split, how.kv_order)


@lru_cache(maxsize=256)
def _kv_head(heads: int, group_size: int, split: str, order: str = "repeat") -> np.ndarray:
    """The kv head each query head uses (read-only, shared)."""
    kv_head = np.zeros(heads, dtype=np.int64) if split == "first" else steps.kv_head_of(heads, group_size, order)
    kv_head.setflags(write=False)
    return kv_head
