"""The validated configuration of one attention computation (shapes, mask, RoPE, failure mode)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from .errors import AttentionInputError
from .failure_modes import FAILURE_MODES, NEEDS, REGISTRY, Recipe, marked, recipe_of
from .masks import NO_REACH, Reach
from .rope import RopeConfig
from .scaling import attention_factor


@dataclass(frozen=True)
class AttentionConfig:
    """Shapes and switches of one call; validates itself once, on construction, and keeps what
    follows from them (d_head, the K/V width, the group size, how the steps are done)."""

    n: int
    d_model: int
    heads: int
    kv_heads: int
    causal: bool = True
    rope: RopeConfig | None = None
    failure_mode: str | None = None
    latent: LatentShape | None = None  # multi-head latent attention (latent.py)
    reach: Reach = NO_REACH  # long contexts (masks.py): a window, sinks, a sink logit, a decode's positions
    variant: Grouped | LatentShape = field(init=False, compare=False)  # MHA/GQA/MQA, or latent attention
    d_head: int = field(init=False, compare=False)
    kv_width: int = field(init=False, compare=False)  # K and V's width: kv_heads * d_head
    group_size: int = field(init=False, compare=False)  # how many query heads share one key/value head
    recipe: Recipe = field(init=False, compare=False)  # how the failure mode (if any) does the ten steps
    scale: float = field(init=False, compare=False)  # what the scores are multiplied by (`scale_with` the recipe)
    decoding: bool = field(init=False, compare=False)  # a decode computes it (decode.py): a failure mode, renumbering
    cache_kind: str = field(init=False, compare=False)  # what a KV cache of it holds: mha, gqa, mqa or mla
    cache_elements_per_token: int = field(init=False, compare=False)  # one layer's: 2 * kv * d_head, or d_c + d_rope
    cache_reach: Reach = field(init=False, compare=False)  # the window and sinks a decode's cache keeps
    cached_positions: int = field(init=False, compare=False)  # what a decoder's cache holds after the last position

    def __post_init__(self) -> None:
        for name in ("n", "d_model", "heads", "kv_heads"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise AttentionInputError(f"{name} must be a positive integer, got {value!r}", field=_field(name))
        if self.d_model % self.heads:
            raise AttentionInputError(f"d_model {self.d_model} is not divisible by heads {self.heads}", field="heads")
        if self.heads % self.kv_heads:
            raise AttentionInputError(
                f"heads {self.heads} is not divisible by kv_heads {self.kv_heads}", field="kv_heads"
            )
        d_head = self.d_model // self.heads
        variant = variant_of(self.kv_heads, self.latent)
        object.__setattr__(self, "variant", variant)  # frozen: set once, here
        object.__setattr__(self, "d_head", d_head)
        variant.check(self)
        if self.failure_mode is not None and self.failure_mode not in FAILURE_MODES:
            raise AttentionInputError(
                f"unknown failure mode {self.failure_mode!r}; expected one of {sorted(FAILURE_MODES)}",
                field="failure_mode",
            )
        needs = REGISTRY[self.failure_mode].needs if self.failure_mode is not None else ()
        self._refuse_without(needs, only=("decode",))  # a decode is causal: said before the reach's own checks
        self.reach.check(self.causal, self.heads, whole_keys_turned=self.rope is not None and self.latent is None)
        if self.rope is not None and self.rope.offset and self.reach.positions == "cache":
            raise AttentionInputError(
                "positions 'cache' turns each key by its place in the cache, so there is no first position to "
                "move: leave rope.offset out",
                field="rope.offset",
            )
        self._refuse_without(needs)
        recipe = recipe_of(self.failure_mode)
        derived = {
            "kv_width": self.kv_heads * d_head,
            "group_size": self.heads // self.kv_heads,
            "recipe": recipe,
            "decoding": recipe.decoding or self.reach.positions == "cache",
            "cache_kind": variant.kind(self.heads),
            "cache_elements_per_token": variant.elements_per_token(d_head),
        }
        for name, value in derived.items():
            object.__setattr__(self, name, value)  # frozen: set once, here
        object.__setattr__(self, "scale", self.scale_with(recipe))
        cache_reach = CACHE_KEEPS[recipe.cache](self.reach.applied(recipe.reach, decoding=True))
        window, sinks = cache_reach.window, cache_reach.sinks
        object.__setattr__(self, "cache_reach", cache_reach)
        object.__setattr__(self, "cached_positions", self.n if window is None else min(self.n, sinks + window))

    def _refuse_without(self, needs: tuple[str, ...], only: tuple[str, ...] = tuple(NEEDS)) -> None:
        """A 422 for the first of the failure mode's `needs` (among `only`) the call does not meet and the
        engine refuses without (REFUSED)."""
        for need in (need for need in needs if need in REFUSED and need in only):
            met, words = REFUSED[need]
            if not met(self):
                raise AttentionInputError(words.format(mode=self.failure_mode), field="failure_mode")

    @property
    def d_rope(self) -> int:
        """The decoupled RoPE width of latent attention (0 without it)."""
        return self.variant.d_rope

    def scale_with(self, how: Recipe) -> float:
        """1/sqrt(d_head) (under latent attention with decoupled RoPE 1/sqrt(d_head + d_rope): each
        score is a dot product that long), unless `how` scales otherwise (no_scaling, scale_by_d_model)."""
        width = self.d_head + self.d_rope
        return {"none": 1.0, "d_model": 1.0 / math.sqrt(self.d_model)}.get(how.scale, 1.0 / math.sqrt(width))


# What a need of a failure mode (failure_modes.NEEDS) asks of a call that the engine refuses it without, and
# what the refusal says; without any other need the engine computes the same numbers as the correct code.
REFUSED: dict[str, tuple[Callable[[AttentionConfig], bool], str]] = {
    "decode": (
        lambda cfg: cfg.causal,
        "failure mode {mode!r} happens only while decoding with a KV cache, which is causal: set causal to true",
    ),
    "whole_cache": (
        lambda cfg: not (cfg.reach.window or cfg.reach.sinks or cfg.reach.sink_logit),
        "the decoding failure modes are computed by a decode over the whole cache, which does not take window, "
        "sinks or sink_logit: leave them out for this failure mode",
    ),
    "window": (
        lambda cfg: cfg.reach.window is not None,
        "failure mode {mode!r} changes nothing without window: give it",
    ),
    "sinks": (lambda cfg: cfg.reach.sinks > 0, "failure mode {mode!r} changes nothing without sinks above 0: give it"),
    "sink_logit": (
        lambda cfg: cfg.reach.sink_logit is not None,
        "failure mode {mode!r} changes nothing without sink_logit: give it",
    ),
    "positions": (
        lambda cfg: cfg.reach.positions == "cache",
        "failure mode {mode!r} changes nothing without positions 'cache': give it",
    ),
    "rope_scaling": (
        lambda cfg: cfg.rope is not None and cfg.rope.scaling is not None,
        "failure mode {mode!r} changes nothing without rope.scaling: give it",
    ),
    "attention_factor": (
        lambda cfg: cfg.rope is not None and attention_factor(cfg.rope.scaling) != 1,
        "failure mode {mode!r} changes nothing without an attention factor: give a yarn or longrope rope.scaling "
        "with a factor above 1",
    ),
    "yarn": (
        lambda cfg: cfg.rope is not None and cfg.rope.scaling is not None and cfg.rope.scaling.rope_type == "yarn",
        "failure mode {mode!r} is about YaRN's ramp: give rope.scaling with rope_type yarn",
    ),
    "llama3": (
        lambda cfg: cfg.rope is not None and cfg.rope.scaling is not None and cfg.rope.scaling.rope_type == "llama3",
        "failure mode {mode!r} is about Llama 3's rule: give rope.scaling with rope_type llama3",
    ),
}
# What a decode's cache keeps of the reach, as its recipe's `cache` says: the window and sinks, or every position.
CACHE_KEEPS: dict[str, Callable[[Reach], Reach]] = {"rolling": lambda reach: reach, "whole": lambda reach: NO_REACH}


# The attention variants' shapes: validated with the config, they say what a cache of them holds; where
# their keys and values come from is the seam's (kv.py).


@dataclass(frozen=True)
class Grouped:
    """Query heads sharing key/value heads in groups: MHA, GQA and MQA are its cases."""

    kv_heads: int
    d_rope = 0  # no decoupled RoPE part: RoPE turns the whole query and key

    def check(self, cfg: AttentionConfig) -> None:
        if cfg.rope is not None and cfg.d_head % 2:
            raise AttentionInputError(
                f"RoPE needs an even d_head, but d_model {cfg.d_model} / heads {cfg.heads} = {cfg.d_head}",
                field="rope",
            )
        if cfg.rope is not None:
            cfg.rope.check(cfg.d_head)

    def kind(self, heads: int) -> str:
        return "mha" if self.kv_heads == heads else "mqa" if self.kv_heads == 1 else "gqa"

    def elements_per_token(self, d_head: int) -> int:
        return 2 * self.kv_heads * d_head  # a key and a value per key/value head

    def conventions(self, cfg: AttentionConfig) -> dict[str, object]:
        if self.kv_heads == cfg.heads:
            return {"grouped_query": None, "latent": None}
        heads = f"{self.kv_heads} key/value head" + ("" if self.kv_heads == 1 else "s")
        order = {"repeat": f"h // {cfg.group_size} (repeat-interleave)", "tile": f"h % {self.kv_heads}"}
        text = f"{heads}; query head h uses kv head {order[cfg.recipe.kv_order]}"
        return {"grouped_query": marked(text, cfg.recipe, cfg.failure_mode, "kv_order"), "latent": None}


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

    def check(self, cfg: AttentionConfig) -> None:
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
        if cfg.rope is not None:
            cfg.rope.check(self.d_rope)

    def kind(self, heads: int) -> str:
        return "mla"

    def elements_per_token(self, d_head: int) -> int:
        return self.d_c + self.d_rope  # the latent and the RoPE key, whatever the heads

    def conventions(self, cfg: AttentionConfig) -> dict[str, object]:
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


# The failure modes that mean the same under latent attention (the rest split or share kv heads).
LATENT_FAILURE_MODES = frozenset(mode for mode in FAILURE_MODES if "head_slices" not in REGISTRY[mode].needs)


def variant_of(kv_heads: int, latent_shape: LatentShape | None) -> Grouped | LatentShape:
    """The one place a call's variant is chosen: latent attention when it has a latent, else grouped heads."""
    return latent_shape if latent_shape is not None else Grouped(kv_heads)


def _field(name: str) -> str:
    return "tokens" if name in ("n", "d_model") else name
