"""Step 3, RoPE: each pair of a head's features turned by its position times the pair's frequency,
the frequencies as the call's scaling sets them (scaling.py).

Pair i of d rotated features turns by p * theta_i at position p = offset + the row's index; "half" pairs
feature i with i + d/2 (GPT-NeoX, Llama), "interleaved" 2i with 2i+1 (GPT-J, RoFormer).

Shapes: d the rotated width (d_head, or d_rope under latent attention), P = d/2 pairs, m rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import AttentionInputError
from .scaling import Scaling, frequencies

ROPE_STYLES: dict[str, str] = {
    "half": "GPT-NeoX / Llama 'rotate half': feature i pairs with feature i + d_head/2",
    "interleaved": "GPT-J / RoFormer: adjacent features (2i, 2i+1) form a pair",
}
DEFAULT_ROPE_BASE = 10000.0
MAX_OFFSET = 10_000_000  # past it a float64 angle carries more than about 1e-9 of rounding


@dataclass(frozen=True)
class RopeConfig:
    """How a call turns its queries and keys: the pairing, the base, the scaling, the first position."""

    style: str = "half"
    base: float = DEFAULT_ROPE_BASE
    scaling: Scaling | None = None
    offset: int = 0

    def __post_init__(self) -> None:
        if self.style not in ROPE_STYLES:
            raise AttentionInputError(
                f"unknown RoPE style {self.style!r}; expected one of {sorted(ROPE_STYLES)}", field="rope.style"
            )
        if not (math.isfinite(self.base) and self.base > 1.0):
            raise AttentionInputError(f"RoPE base must be a finite number above 1, got {self.base}", field="rope.base")
        if isinstance(self.offset, bool) or not isinstance(self.offset, int) or not 0 <= self.offset <= MAX_OFFSET:
            raise AttentionInputError(
                f"the offset is the first token's position, a whole number from 0 to {MAX_OFFSET:,}: {self.offset!r}",
                field="rope.offset",
            )

    def check(self, width: int) -> None:
        if self.scaling is not None:
            self.scaling.check(width)

    @classmethod
    def coerce(cls, rope: RopeConfig | dict | str | None) -> RopeConfig | None:
        if rope is None or isinstance(rope, RopeConfig):
            return rope
        if isinstance(rope, str):
            return cls(style=rope)
        if isinstance(rope, dict):
            return cls(
                style=rope.get("style", "half"),
                base=float(rope.get("base", DEFAULT_ROPE_BASE)),
                scaling=Scaling.coerce(rope.get("scaling")),
                offset=rope.get("offset", 0),
            )
        raise AttentionInputError(f"rope must be a style name or a mapping, got {type(rope).__name__}", field="rope")


def rotate(x: np.ndarray, rope: RopeConfig, positions: np.ndarray | None = None, slip: str = "applied") -> np.ndarray:
    """Turn each row's pairs by its position (`positions[r]`, by default its index, plus the offset) times
    the pair's frequency, cos and sin times the attention factor. "half" pairs feature i with i + d/2
    (GPT-NeoX, Llama); "interleaved" pairs 2i with 2i+1 (GPT-J, RoFormer): same angles, other numbers."""
    *_, m, d = x.shape
    at = np.arange(m, dtype=np.float64) if positions is None else np.asarray(positions, dtype=np.float64)
    at = at + rope.offset if rope.offset else at
    f = frequencies(rope.base, rope.scaling, d, int(at.max()) + 1 if m else rope.offset + 1, slip)
    angle = at[:, None] * f.scaled[None, :]  # [m, P]
    cos, sin = np.cos(angle), np.sin(angle)
    if f.attention_factor != 1.0:
        cos, sin = cos * f.attention_factor, sin * f.attention_factor
    if rope.style == "half":
        x1, x2 = x[..., : d // 2], x[..., d // 2 :]
        return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)  # [.., m, d]
    out = np.empty_like(x)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    out[..., 0::2] = x1 * cos - x2 * sin
    out[..., 1::2] = x2 * cos + x1 * sin
    return out  # [.., m, d]


def pairs_table(rope: RopeConfig, width: int, length: int, slip: str = "applied") -> dict[str, Any]:
    """Per pair: the frequency at the model's base and as scaled, each wavelength (2 pi / theta, in
    positions), the ratio, what happened, the share kept; and the attention factor."""
    f = frequencies(rope.base, rope.scaling, width, length, slip)
    rows = zip(f.original.tolist(), f.scaled.tolist(), f.kept.tolist(), f.statuses(), strict=True)
    return {
        "width": width,
        "length": length,
        "base": f.base,
        "attention_factor": f.attention_factor,
        "yarn_bounds": None if f.bounds is None else list(f.bounds),
        "pairs": [
            {
                "pair": i,
                "inv_freq": t,
                "scaled_inv_freq": s,
                "wavelength": 2 * math.pi / t,
                "scaled_wavelength": 2 * math.pi / s,
                "ratio": s / t,
                "status": status,
                "kept_share": None if math.isnan(share) else share,
            }
            for i, (t, s, share, status) in enumerate(rows)
        ],
    }
