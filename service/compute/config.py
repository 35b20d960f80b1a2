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
    d_head: int = field(init=False, compare=False)
    kv_width: int = field(init=False, compare=False)  # K and V's width: kv_heads * d_head
    group_size: int = field(init=False, compare=False)  # how many query heads share one key/value head
    steps: Steps = field(init=False, compare=False)  # how the failure mode (if any) does the pipeline

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
        if self.rope is not None and d_head % 2:
            raise AttentionInputError(
                f"RoPE needs an even d_head, but d_model {self.d_model} / heads {self.heads} = {d_head}",
                field="rope",
            )
        if self.failure_mode is not None and self.failure_mode not in FAILURE_MODES:
            raise AttentionInputError(
                f"unknown failure mode {self.failure_mode!r}; expected one of {sorted(FAILURE_MODES)}",
                field="failure_mode",
            )
        derived = {"d_head": d_head, "kv_width": self.kv_heads * d_head, "group_size": self.heads // self.kv_heads,
                   "steps": steps_of(self.failure_mode)}  # fmt: skip
        for name, value in derived.items():
            object.__setattr__(self, name, value)  # frozen: set once, here

    @property
    def scale(self) -> float:
        """What the scores are multiplied by (1/sqrt(d_head), unless the failure mode scales otherwise)."""
        how = self.steps.scale
        return {"none": 1.0, "d_model": 1.0 / math.sqrt(self.d_model)}.get(how, 1.0 / math.sqrt(self.d_head))


def _field(name: str) -> str:
    return "tokens" if name in ("n", "d_model") else name
