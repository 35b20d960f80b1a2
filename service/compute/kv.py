"""The seam for the attention variants: where each query head's keys and values come from, chosen
once when a call is prepared. The pass (pipeline.py) and the decoder (decode.py) call it and never
ask which variant they hold:

    variant = variant_of(kv_heads, latent)          # when the config is made (config.py)
    source  = variant.source(cfg, w, recipe, ...)   # with the weights, once per call
    heads   = source.project(x, positions)          # steps 1-3 of some rows: queries, and what a cache keeps
    k, v    = source.keys_values(cache)             # each query head's keys and values from a cache
    out     = source.attend(q, cache, scale, mask)  # steps 4-7 of queries over a cache

Grouped heads (MHA, GQA and MQA: kv_heads = H, 1 < kv_heads < H, kv_heads = 1) cache keys and values
per key/value head, [kv, L, d]; latent attention (DeepSeek-V2's MLA, latent.py) caches the latent
and the decoupled RoPE key, [L, d_c] and [L, d_rope], and makes keys and values from them (naive) or
never makes them (absorbed). Every cached part holds its positions along axis -2, so a cache appends
and reads them alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import latent
from .errors import AttentionInputError
from .failure_modes import FAILURE_MODES, REGISTRY, marked
from .masks import Masking
from .steps import Heads, finite, gather_heads, project, repeat_kv, rope, scores, scores_field, split_heads

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


# -- the variants' shapes: validated with the config, they say what a cache of them holds


@dataclass(frozen=True)
class Grouped:
    """Query heads sharing key/value heads in groups: MHA, GQA and MQA are its cases."""

    kv_heads: int
    d_rope = 0  # no decoupled RoPE part: RoPE turns the whole query and key

    def check(self, cfg: Any) -> None:
        if cfg.rope is not None and cfg.d_head % 2:
            raise AttentionInputError(
                f"RoPE needs an even d_head, but d_model {cfg.d_model} / heads {cfg.heads} = {cfg.d_head}",
                field="rope",
            )

    def kind(self, heads: int) -> str:
        return "mha" if self.kv_heads == heads else "mqa" if self.kv_heads == 1 else "gqa"

    def elements_per_token(self, d_head: int) -> int:
        return 2 * self.kv_heads * d_head  # a key and a value per key/value head

    def conventions(self, cfg: Any) -> dict[str, Any]:
        if self.kv_heads == cfg.heads:
            return {"grouped_query": None, "latent": None}
        heads = f"{self.kv_heads} key/value head" + ("" if self.kv_heads == 1 else "s")
        order = {"repeat": f"h // {cfg.group_size} (repeat-interleave)", "tile": f"h % {self.kv_heads}"}
        text = f"{heads}; query head h uses kv head {order[cfg.recipe.kv_order]}"
        return {"grouped_query": marked(text, cfg.recipe, cfg.failure_mode, "kv_order"), "latent": None}

    def source(self, cfg: Any, w: Any, recipe: Any, features: np.ndarray, kv_features: np.ndarray) -> GroupedHeads:
        return GroupedHeads(cfg, w, recipe, features, kv_features)


@dataclass(frozen=True)
class LatentShape:
    """Multi-head latent attention's widths (latent.py): the latent `d_c` every head's keys and
    values come from, the decoupled RoPE part `d_rope` (0: none), and whether W_UK is absorbed
    into the query (the same numbers, computed against the latent directly)."""

    d_c: int
    d_rope: int = 0
    absorbed: bool = False

    def __post_init__(self) -> None:
        if self.d_rope % 2:
            raise AttentionInputError(
                f"RoPE turns pairs of features: the decoupled RoPE width is {self.d_rope}, which is odd",
                field="latent.rope_key",
            )

    def check(self, cfg: Any) -> None:
        """Every head's keys and values come from the latent: no kv heads to share, and no split bug
        to apply to them (the engine refuses what it would compute wrongly)."""
        if cfg.kv_heads != cfg.heads:
            raise AttentionInputError(
                "latent attention makes every head's keys and values from the latent (latent.up_key, "
                f"latent.up_value): leave kv_heads out (it is {cfg.kv_heads}, heads is {cfg.heads})",
                field="kv_heads",
            )
        if cfg.failure_mode is not None and cfg.failure_mode not in LATENT_FAILURE_MODES:
            raise AttentionInputError(
                f"failure mode {cfg.failure_mode!r} is about splitting or sharing key/value heads, which latent "
                f"attention does not have; with a latent the engine computes {sorted(LATENT_FAILURE_MODES)}",
                field="failure_mode",
            )
        if cfg.rope is not None and not self.d_rope:
            raise AttentionInputError(
                "under latent attention RoPE turns only the decoupled parts (DeepSeek-V2): give latent.rope_key "
                "and latent.rope_query, or leave rope out",
                field="rope",
            )

    def kind(self, heads: int) -> str:
        return "mla"

    def elements_per_token(self, d_head: int) -> int:
        return self.d_c + self.d_rope  # the latent and the RoPE key, whatever the heads

    def conventions(self, cfg: Any) -> dict[str, Any]:
        form = (
            "absorbed: W_UK folded into the query, scores taken against the latent, W_UV after the mix"
            if self.absorbed
            else "naive: K = C W_UK and V = C W_UV made for every head"
        )
        block = {
            "form": form,
            "d_c": self.d_c,
            "d_rope": self.d_rope,
            "cached_per_token": f"d_c + d_rope = {self.d_c + self.d_rope} numbers (arXiv:2405.04434)",
            "rope": "turns only the decoupled parts q_R and k_R (one k_R shared by every head)"
            if self.d_rope
            else None,
        }
        return {"grouped_query": None, "latent": block}

    def source(self, cfg: Any, w: Any, recipe: Any, features: np.ndarray, kv_features: np.ndarray) -> LatentSource:
        return (AbsorbedLatent if self.absorbed else LatentSource)(cfg, w, recipe, features)


# The failure modes that mean the same under latent attention (the rest split or share kv heads).
LATENT_FAILURE_MODES = frozenset(mode for mode in FAILURE_MODES if "head_slices" not in REGISTRY[mode].needs)


def variant_of(kv_heads: int, latent_shape: LatentShape | None) -> Grouped | LatentShape:
    """The one place a call's variant is chosen: latent attention when it has a latent, else grouped heads."""
    return latent_shape if latent_shape is not None else Grouped(kv_heads)


def whole(engine: dict[str, Any]) -> dict[str, Any]:
    """A call's arguments with keys and values made: an absorbed latent asked in its naive form (the same output)."""
    lat = engine.get("latent")
    return {**engine, "latent": {**lat, "absorbed": False}} if isinstance(lat, dict) and lat.get("absorbed") else engine


# -- the sources: a variant with its weights, for one call


class GroupedHeads:
    """Keys and values per key/value head, each serving a group of query heads (`recipe.kv_order`)."""

    def __init__(self, cfg: Any, w: Any, recipe: Any, features: np.ndarray, kv_features: np.ndarray):
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
        qr, kr = (rotated(a, cfg.rope, positions, "query" if a is qh else "key") for a in (qh, kh))  # 3.
        return Heads(qr, (kr, vh), qh, kh)

    def keys_values(self, cache: Parts) -> tuple[np.ndarray, np.ndarray]:
        """Each query head's keys and values: its kv head's ([kv, L, d] -> [H, L, d])."""
        group, order = self.cfg.group_size, self.recipe.kv_order
        if group == 1:
            return cache  # one key/value head per query head: nothing to repeat
        return repeat_kv(cache[0], group, order), repeat_kv(cache[1], group, order)

    def attend(self, q: np.ndarray, cache: Parts, scale: float, masking: Masking) -> Attended:
        k, v = self.keys_values(cache)  # [H, L, d] each
        s, a, o = masking.attention(q, k, v, scale, self.field)  # 4-7.
        return Attended(s, a, o, k, v)

    def scores(self, q: np.ndarray, cache: Parts, scale: float) -> np.ndarray:
        return scores(q, self.keys_values(cache)[0], scale)  # [H, m, d] @ [H, d, L] -> [H, m, L]

    def named(self, cache: Parts) -> dict[str, np.ndarray]:
        """What the cache holds, by name: keys and values per key/value head."""
        return {"key": cache[0], "value": cache[1]}


class LatentSource:
    """Keys and values made from the cached latent (the naive form: K and V in full, as written)."""

    def __init__(self, cfg: Any, w: Any, recipe: Any, features: np.ndarray):
        self.cfg, self.w, self.recipe, self.features = cfg, w, recipe, features
        self.field = scores_field(w)

    def project(self, x: np.ndarray, positions: np.ndarray | None) -> Heads:
        """Steps 1-3: the content queries, the latent and the decoupled RoPE parts."""
        _, qh = queries(x, self.w, self.features, self.recipe.split)  # 1-2. [H, m, d_head]
        return latent.project(x, qh, self.cfg, self.w.latent, positions)

    def keys_values(self, cache: Parts) -> tuple[Any, Any]:
        return latent.keys_values(*cache, self.cfg, self.w.latent)  # [H, L, d_head + d_rope], [H, L, d_head]

    def attend(self, q: np.ndarray, cache: Parts, scale: float, masking: Masking) -> Attended:
        k, v = self.keys_values(cache)
        s, a, o = masking.attention(q, k, v, scale, self.field)  # 4-7.
        return Attended(s, a, o, k, v)

    def scores(self, q: np.ndarray, cache: Parts, scale: float) -> np.ndarray:
        return scores(q, self.keys_values(cache)[0], scale)

    def named(self, cache: Parts) -> dict[str, np.ndarray]:
        """What the cache holds, by name: the latent, and the RoPE key when there is one."""
        c, k_r = cache
        return {"latent": c, "rope_key": k_r} if self.cfg.d_rope else {"latent": c}


class AbsorbedLatent(LatentSource):
    """W_UK folded into the query and W_UV applied after the mix: K and V are never made."""

    def keys_values(self, cache: Parts) -> tuple[Any, Any]:
        return None, None

    def attend(self, q: np.ndarray, cache: Parts, scale: float, masking: Masking) -> Attended:
        s, a, o, extra = latent.attend_absorbed(q, cache, self.cfg, self.w.latent, scale, masking.weights)  # 4-7.
        return Attended(s, a, o, None, None, extra)

    def scores(self, q: np.ndarray, cache: Parts, scale: float) -> np.ndarray:
        return latent.absorbed_scores(q, cache, self.cfg, self.w.latent, scale)[0]


def traced(named: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """What a cache holds that a trace keeps as it is: the latent and its RoPE key (a grouped cache's
    keys and values are kept per query head instead, as the trace's `key` and `value`)."""
    return {name: part for name, part in named.items() if name in ("latent", "rope_key")}


# -- steps 1-3 as every source does them


def queries(x: np.ndarray, w: Any, features: np.ndarray, split: str) -> tuple[np.ndarray, np.ndarray]:
    """Steps 1-2 for the queries: Q = X W_Q (+ b) [m, d_model], and each head's slice [H, m, d_head]."""
    q = projected(x, w.query, None, w.biases[0], "query")  # 1. [m, d_model]
    return q, split_by(q, features, split)  # 2. [m, d_model] -> [H, m, d_head]


def projected(x: np.ndarray, weight, width: int | None, bias, name: str) -> np.ndarray:
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


def rotated(a: np.ndarray, rope_cfg: Any, positions: np.ndarray | None, name: str) -> np.ndarray:
    """Step 3, checked: RoPE of finite numbers near float64's limit can overflow (the field named is `rope`)."""
    return finite(rope(a, rope_cfg.style, rope_cfg.base, positions), f"RoPE on the {name}s", "rope")
