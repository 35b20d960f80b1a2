"""The validated configuration of one attention computation (shapes, mask, RoPE, failure mode)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .errors import AttentionInputError
from .failure_modes import FAILURE_MODES, Steps, steps_of

ROPE_STYLES: dict[str, str] = {
    "half": "GPT-NeoX / Llama 'rotate half': feature i pairs with feature i + d_head/2",
    "interleaved": "GPT-J / RoFormer: adjacent features (2i, 2i+1) form a pair",
}

DEFAULT_ROPE_BASE = 10000.0


@dataclass(frozen=True)
class RopeConfig:
    style: str = "half"
    base: float = DEFAULT_ROPE_BASE

    def __post_init__(self) -> None:
        if self.style not in ROPE_STYLES:
            raise AttentionInputError(
                f"unknown RoPE style {self.style!r}; expected one of {sorted(ROPE_STYLES)}",
                field="rope.style",
            )
        if not (math.isfinite(self.base) and self.base > 1.0):
            raise AttentionInputError(f"RoPE base must be a finite number above 1, got {self.base}", field="rope.base")

    @classmethod
    def coerce(cls, rope: RopeConfig | dict | str | None) -> RopeConfig | None:
        if rope is None or isinstance(rope, RopeConfig):
            return rope
        if isinstance(rope, str):
            return cls(style=rope)
        if isinstance(rope, dict):
            return cls(style=rope.get("style", "half"), base=float(rope.get("base", DEFAULT_ROPE_BASE)))
        raise AttentionInputError(f"rope must be a style name or a mapping, got {type(rope).__name__}", field="rope")


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
    d_head: int = field(init=False, compare=False)
    kv_width: int = field(init=False, compare=False)  # K and V's width: kv_heads * d_head
    group_size: int = field(init=False, compare=False)  # how many query heads share one key/value head
    steps: Steps = field(init=False, compare=False)  # how the failure mode (if any) does the pipeline
    scale: float = field(init=False, compare=False)  # what the scores are multiplied by (`scale_with` steps)
    decoding: bool = field(init=False, compare=False)  # the failure mode only decoding makes (decode.py)
    cache_kind: str = field(init=False, compare=False)  # what a KV cache of it holds: mha, gqa, mqa or mla
    cache_elements_per_token: int = field(init=False, compare=False)  # one layer's: 2 * kv * d_head, or d_c + d_rope

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
        if self.latent is not None:
            self._check_latent()
        elif self.rope is not None and d_head % 2:
            raise AttentionInputError(
                f"RoPE needs an even d_head, but d_model {self.d_model} / heads {self.heads} = {d_head}",
                field="rope",
            )
        if self.failure_mode is not None and self.failure_mode not in FAILURE_MODES:
            raise AttentionInputError(
                f"unknown failure mode {self.failure_mode!r}; expected one of {sorted(FAILURE_MODES)}",
                field="failure_mode",
            )
        if self.failure_mode is not None and not self.causal and steps_of(self.failure_mode).decoding:
            raise AttentionInputError(
                f"failure mode {self.failure_mode!r} happens only while decoding with a KV cache, which is causal: "
                "set causal to true",
                field="failure_mode",
            )
        steps = steps_of(self.failure_mode)
        derived = {"d_head": d_head, "kv_width": self.kv_heads * d_head, "group_size": self.heads // self.kv_heads,
                   "steps": steps, "decoding": steps.decoding}  # fmt: skip
        for name, value in derived.items():
            object.__setattr__(self, name, value)  # frozen: set once, here
        kind, per_token = self._cache()
        derived = {"scale": self.scale_with(steps), "cache_kind": kind, "cache_elements_per_token": per_token}
        for name, value in derived.items():
            object.__setattr__(self, name, value)  # frozen: set once, here

    @property
    def d_rope(self) -> int:
        """The decoupled RoPE width of latent attention (0 without it)."""
        return 0 if self.latent is None else self.latent.d_rope

    def scale_with(self, how: Steps) -> float:
        """1/sqrt(d_head) (under latent attention with decoupled RoPE 1/sqrt(d_head + d_rope): each
        score is a dot product that long), unless `how` scales otherwise (no_scaling, scale_by_d_model)."""
        width = self.d_head + self.d_rope
        return {"none": 1.0, "d_model": 1.0 / math.sqrt(self.d_model)}.get(how.scale, 1.0 / math.sqrt(width))

    def _cache(self) -> tuple[str, int]:
        """What a KV cache of this attention holds per token in one layer: keys and values per kv head
        (mha, gqa, mqa: 2 * kv_heads * d_head numbers), or the latent (mla: d_c + d_rope)."""
        if self.latent is not None:
            return "mla", self.latent.d_c + self.latent.d_rope
        kind = "mha" if self.kv_heads == self.heads else "mqa" if self.kv_heads == 1 else "gqa"
        return kind, 2 * self.kv_heads * (self.d_model // self.heads)

    def _check_latent(self) -> None:
        """Latent attention makes every head's keys and values from the latent: no kv heads to share,
        and no split bug to apply to them (the engine refuses what it would compute wrongly)."""
        assert self.latent is not None
        if self.kv_heads != self.heads:
            raise AttentionInputError(
                "latent attention makes every head's keys and values from the latent (latent.up_key, "
                f"latent.up_value): leave kv_heads out (it is {self.kv_heads}, heads is {self.heads})",
                field="kv_heads",
            )
        if self.failure_mode is not None and self.failure_mode not in LATENT_FAILURE_MODES:
            raise AttentionInputError(
                f"failure mode {self.failure_mode!r} is about splitting or sharing key/value heads, which latent "
                f"attention does not have; with a latent the engine computes {sorted(LATENT_FAILURE_MODES)}",
                field="failure_mode",
            )
        if self.rope is not None and not self.latent.d_rope:
            raise AttentionInputError(
                "under latent attention RoPE turns only the decoupled parts (DeepSeek-V2): give latent.rope_key "
                "and latent.rope_query, or leave rope out",
                field="rope",
            )


# The failure modes that mean the same under latent attention (the rest split or share kv heads).
LATENT_FAILURE_MODES = frozenset(FAILURE_MODES) - {"reuse_first_slice", "interleaved_split", "gqa_tiled"}


def _field(name: str) -> str:
    return "tokens" if name in ("n", "d_model") else name
