"""The seam for the attention variants: where each query head's keys and values come from, chosen
once when a call is prepared. The pass (pipeline.py) and the decoder (decode.py) call it and never
ask which variant they hold:

    source = source_of(cfg, w, recipe, features, kv_features)  # once per call: the config's variant
    heads  = source.project(x, positions)          # steps 1-3 of some rows: queries, and what a cache keeps
    k, v   = source.keys_values(cache)             # each query head's keys and values from a cache
    out    = source.attend(q, cache, scale, mask)  # steps 4-7 of queries over a cache

Grouped heads (MHA, GQA and MQA: kv_heads = H, 1 < kv_heads < H, kv_heads = 1) cache keys and values
per key/value head, [kv, L, d]; latent attention (DeepSeek-V2's MLA, latent.py) caches the latent
and the decoupled RoPE key, [L, d_c] and [L, d_rope], and makes keys and values from them (naive) or
never makes them (absorbed). Every cached part holds its positions along axis -2, so a cache appends
and reads them alike. The three sources keep one `KeyValueSource` protocol; a contract test holds
each to the same answers (tests/compute/test_kv.py).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from . import latent
from .config import AttentionConfig
from .failure_modes import Recipe
from .masks import Masking
from .rope import rotate
from .steps import Heads, finite, gather_heads, project, repeat_kv, scores, scores_field, split_heads
from .weights import Projections

Parts = tuple[np.ndarray, np.ndarray]  # the two parts a cache keeps, positions along axis -2


@dataclass(frozen=True, eq=False)
class Attended:
    """Steps 4-7 of a block of queries over a cache."""

    scores: np.ndarray  # [H, m, L] scaled, before masking
    weights: np.ndarray  # [H, m, L]
    outputs: np.ndarray  # [H, m, d_v]
    key: np.ndarray | None  # [H, L, d_k] each query head's keys (None: never formed)
    value: np.ndarray | None  # [H, L, d_v]
    extra: dict[str, np.ndarray] = field(default_factory=dict)  # what the variant keeps besides


class KeyValueSource(Protocol):
    """Where a call's keys and values come from, for any block of rows and any cache of them."""

    def project(self, x: np.ndarray, positions: np.ndarray | None) -> Heads:
        """Steps 1-3 on rows `x` [m, d_model] at `positions` [m] (their indexes when None)."""
        ...

    def keys_values(self, cache: Parts) -> tuple[np.ndarray, np.ndarray] | tuple[None, None]:
        """Each query head's keys [H, L, d_k] and values [H, L, d_v] (None, None: never formed)."""
        ...

    def attend(self, q: np.ndarray, cache: Parts, scale: float, masking: Masking) -> Attended:
        """Steps 4-7 of queries `q` [H, m, d_q] over a cache."""
        ...

    def scores(self, q: np.ndarray, cache: Parts, scale: float) -> np.ndarray:
        """Step 4 alone: [H, m, L], scaled, before masking."""
        ...

    def named(self, cache: Parts) -> dict[str, np.ndarray]:
        """What the cache holds, by name."""
        ...


def source_of(
    cfg: AttentionConfig, w: Projections, how: Recipe, features: np.ndarray, kv_features: np.ndarray
) -> KeyValueSource:
    """The one place a call's source is chosen, from the config's variant: grouped heads, or latent
    attention naive or absorbed."""
    if cfg.latent is None:
        return GroupedHeads(cfg, w, how, features, kv_features)
    return (AbsorbedLatent if cfg.latent.absorbed else LatentSource)(cfg, w, how, features)


class WholeKeys(ABC):
    """Steps 4-7 over keys and values made in full (`keys_values`): grouped heads and the naive latent."""

    cfg: AttentionConfig
    field: str

    @abstractmethod
    def keys_values(self, cache: Parts) -> tuple[np.ndarray, np.ndarray]:
        """Each query head's keys [H, L, d_k] and values [H, L, d_v]: where they come from is the source's."""

    def attend(self, q: np.ndarray, cache: Parts, scale: float, masking: Masking) -> Attended:
        k, v = self.keys_values(cache)  # [H, L, d_k], [H, L, d_v]
        s, a, o = masking.attention(q, k, v, scale, self.field)  # 4-7.
        return Attended(s, a, o, k, v)

    def scores(self, q: np.ndarray, cache: Parts, scale: float) -> np.ndarray:
        return scores(q, self.keys_values(cache)[0], scale)  # [H, m, d] @ [H, d, L] -> [H, m, L]


class GroupedHeads(WholeKeys):
    """Keys and values per key/value head, each serving a group of query heads (`recipe.kv_order`)."""

    def __init__(
        self, cfg: AttentionConfig, w: Projections, recipe: Recipe, features: np.ndarray, kv_features: np.ndarray
    ):
        self.cfg, self.w, self.recipe = cfg, w, recipe
        self.features, self.kv_features = features, kv_features
        self.field = scores_field(w)

    def project(self, x: np.ndarray, positions: np.ndarray | None) -> Heads:
        """Steps 1-3 on rows `x` [m, d_model] at `positions` [m] (their indexes when None)."""
        cfg, w, split = self.cfg, self.w, self.recipe.split
        q, qh = queries(x, w, self.features, split)  # 1-2. [m, d_model], [H, m, d_head]
        _, b_k, b_v, _ = w.biases
        plain_k = w.key is None and b_k is None  # K = X (or its first kv_width columns): nothing to compute
        kv_x = x if cfg.kv_width == cfg.d_model else x[:, : cfg.kv_width]  # the identity's first kv_width columns
        k = kv_x if plain_k else projected(x, w.key, cfg.kv_width, b_k, "key")  # 1.
        v = k if plain_k and w.value is None and b_v is None else projected(x, w.value, cfg.kv_width, b_v, "value")
        kh = qh if k is q and self.kv_features is self.features else split_by(k, self.kv_features, split)  # 2.
        vh = kh if v is k else split_by(v, self.kv_features, split)  # 2. [m, kv_width] -> [kv, m, d_head]
        if cfg.rope is None:
            return Heads(qh, (kh, vh))
        qr, kr = (rotated(a, cfg, positions, "query" if a is qh else "key") for a in (qh, kh))  # 3.
        return Heads(qr, (kr, vh), qh, kh)

    def keys_values(self, cache: Parts) -> tuple[np.ndarray, np.ndarray]:
        """Each query head's keys and values: its kv head's ([kv, L, d] -> [H, L, d])."""
        group, order = self.cfg.group_size, self.recipe.kv_order
        if group == 1:
            return cache  # one key/value head per query head: nothing to repeat
        return repeat_kv(cache[0], group, order), repeat_kv(cache[1], group, order)

    def named(self, cache: Parts) -> dict[str, np.ndarray]:
        """What the cache holds, by name: keys and values per key/value head."""
        return {"key": cache[0], "value": cache[1]}


class LatentParts:
    """What both forms of latent attention share: the latent and the RoPE parts projected and cached."""

    def __init__(self, cfg: AttentionConfig, w: Projections, recipe: Recipe, features: np.ndarray):
        assert w.latent is not None  # prepare gives a config with a latent its latent weights
        self.cfg, self.w, self.lw, self.recipe, self.features = cfg, w, w.latent, recipe, features
        self.field = scores_field(w)

    def project(self, x: np.ndarray, positions: np.ndarray | None) -> Heads:
        """Steps 1-3: the content queries, the latent and the decoupled RoPE parts."""
        _, qh = queries(x, self.w, self.features, self.recipe.split)  # 1-2. [H, m, d_head]
        return latent.project(x, qh, self.cfg, self.lw, positions)

    def named(self, cache: Parts) -> dict[str, np.ndarray]:
        """What the cache holds, by name: the latent, and the RoPE key when there is one."""
        c, k_r = cache
        return {"latent": c, "rope_key": k_r} if self.cfg.d_rope else {"latent": c}


class LatentSource(LatentParts, WholeKeys):
    """Keys and values made from the cached latent (the naive form: K and V in full, as written)."""

    def keys_values(self, cache: Parts) -> tuple[np.ndarray, np.ndarray]:
        return latent.keys_values(*cache, self.cfg, self.lw)  # [H, L, d_head + d_rope], [H, L, d_head]


class AbsorbedLatent(LatentParts):
    """W_UK folded into the query and W_UV applied after the mix: K and V are never made."""

    def keys_values(self, cache: Parts) -> tuple[None, None]:
        return None, None

    def attend(self, q: np.ndarray, cache: Parts, scale: float, masking: Masking) -> Attended:
        s, a, o, extra = latent.attend_absorbed(q, cache, self.cfg, self.lw, scale, masking.weights)  # 4-7.
        return Attended(s, a, o, None, None, extra)

    def scores(self, q: np.ndarray, cache: Parts, scale: float) -> np.ndarray:
        return latent.absorbed_scores(q, cache, self.cfg, self.lw, scale)[0]


def traced(named: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """What a cache holds that a trace keeps as it is: the latent and its RoPE key (a grouped cache's
    keys and values are kept per query head instead, as the trace's `key` and `value`)."""
    return {name: part for name, part in named.items() if name in ("latent", "rope_key")}


# -- steps 1-3 as every source does them


def queries(x: np.ndarray, w: Projections, features: np.ndarray, split: str) -> tuple[np.ndarray, np.ndarray]:
    """Steps 1-2 for the queries: Q = X W_Q (+ b) [m, d_model], and each head's slice [H, m, d_head]."""
    q = projected(x, w.query, None, w.biases[0], "query")  # 1. [m, d_model]
    return q, split_by(q, features, split)  # 2. [m, d_model] -> [H, m, d_head]


def projected(
    x: np.ndarray, weight: np.ndarray | None, width: int | None, bias: np.ndarray | None, name: str
) -> np.ndarray:
    """Step 1 for one of Q, K, V, checked: an overflow names the projection (or its bias, when the
    projection is the identity). The identity of checked tokens is the tokens: nothing to compute."""
    if weight is None and bias is None and (width is None or width == x.shape[1]):
        return x
    field = f"projections.{name}" if weight is not None or bias is None else f"biases.{name}"
    what = f"the {name} projection X @ W_{name[0].upper()}" + (" + b" if bias is not None else "")
    return finite(project(x, weight, width, bias), what, field, None if weight is None and bias is None else True)


def split_by(m: np.ndarray, features: np.ndarray, split: str) -> np.ndarray:
    """[n, heads*d_head] -> [heads, n, d_head]: a reshape when the slices are contiguous, else a gather."""
    return split_heads(m, features.shape[0]) if split == "contiguous" else gather_heads(m, features)


def rotated(a: np.ndarray, cfg: AttentionConfig, positions: np.ndarray | None, name: str) -> np.ndarray:
    """Step 3, checked: RoPE of finite numbers near float64's limit can overflow (the field named is `rope`)."""
    assert cfg.rope is not None
    return finite(rotate(a, cfg.rope, positions, cfg.recipe.scaling), f"RoPE on the {name}s", "rope")
