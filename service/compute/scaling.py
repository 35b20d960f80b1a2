"""How a model read past the length L it was trained on changes RoPE's frequencies (`rope_scaling`).

Pair i of d rotated features turns at theta_i = base^(-2i/d). With Hugging Face's names and definitions
(transformers.modeling_rope_utils, which computes them in float32; here float64), for a factor s:
    linear    theta_i / s: position interpolation, every pair slowed
    ntk       the base raised to b s^(d/(d-2)) (NTK-aware): the fastest pair kept, the slowest divided by s
    dynamic   ntk's rule at the length n = the last position + 1: b ((s n / L) - (s - 1))^(d/(d-2)) past L
    yarn      pairs below `low` kept, above `high` divided by s, a ramp between (the bounds where a pair
              turns beta_fast and beta_slow times over L, floored and ceiled unless `truncate` is false;
              `ramp: "paper"` ramps linearly in L / wavelength instead), cos and sin times 0.1 ln s + 1
    llama3    wavelengths 2 pi / theta under L / high_freq_factor kept, over L / low_freq_factor divided by
              s, those between blended by (L / wavelength - low) / (high - low)
    longrope  theta_i / f_i, Phi-3's searched factors (short while n <= L, long past it), cos and sin times
              sqrt(1 + ln s / ln L)
`dynamic` and `longrope` follow the length: a decode's step computes them at its own, as a model does.
A failure mode's `scaling` (failure_modes.Recipe) says how a broken implementation does it (SLIPS).

Shapes: d the rotated width (d_head, or d_rope under latent attention), P = d/2 pairs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from functools import lru_cache
from typing import Any

import numpy as np

from .errors import AttentionInputError

SCALINGS: dict[str, str] = {
    "linear": "position interpolation: every pair's frequency divided by the factor",
    "ntk": "NTK-aware: the base raised to base * factor^(d/(d-2)), dynamic's rule at a fixed length",
    "dynamic": "dynamic NTK: the base raised by the length past original_max_position_embeddings",
    "yarn": "YaRN: fast pairs kept, slow pairs divided, a ramp between; cos and sin times the attention factor",
    "llama3": "Llama 3: short wavelengths kept, long ones divided by the factor, those between blended",
    "longrope": "LongRoPE: each pair divided by its own factor (short, or long past the original length)",
}
# The fields each type reads beside `factor` (a field another type reads is refused, never ignored).
READS: dict[str, tuple[str, ...]] = {
    "linear": (),
    "ntk": (),
    "dynamic": ("original_max_position_embeddings",),
    "yarn": (
        "original_max_position_embeddings",
        "beta_fast",
        "beta_slow",
        "truncate",
        "mscale",
        "mscale_all_dim",
        "attention_factor",
        "ramp",
    ),
    "llama3": ("original_max_position_embeddings", "low_freq_factor", "high_freq_factor"),
    "longrope": ("original_max_position_embeddings", "short_factor", "long_factor", "attention_factor"),
}
REQUIRED = {"dynamic", "yarn", "llama3", "longrope"}  # the types that need original_max_position_embeddings


@dataclass(frozen=True)
class Scaling:
    """A model's `rope_scaling` (Hugging Face's field names); `ramp` chooses YaRN's code or paper ramp."""

    rope_type: str
    factor: float = 1.0
    original_max_position_embeddings: int | None = None
    beta_fast: float | None = None
    beta_slow: float | None = None
    truncate: bool | None = None
    mscale: float | None = None
    mscale_all_dim: float | None = None
    attention_factor: float | None = None
    low_freq_factor: float | None = None
    high_freq_factor: float | None = None
    short_factor: tuple[float, ...] | None = None
    long_factor: tuple[float, ...] | None = None
    ramp: str | None = None

    def __post_init__(self) -> None:
        kind = self.rope_type
        if kind not in SCALINGS:
            raise _refused("rope_type", f"unknown RoPE scaling {kind!r}; expected one of {sorted(SCALINGS)}")
        for name in (f.name for f in fields(self)):
            if name not in ("rope_type", "factor", *READS[kind]) and getattr(self, name) is not None:
                reads = ", ".join(("factor", *READS[kind]))
                raise _refused(name, f"{kind} scaling does not read {name} (it reads {reads})")
        if not (math.isfinite(self.factor) and self.factor >= 1.0):
            raise _refused("factor", f"the factor must be a finite number of at least 1, got {self.factor}")
        if kind in REQUIRED and self.original_max_position_embeddings is None:
            raise _refused("original_max_position_embeddings", f"{kind} scaling needs the length L it was trained on")
        if self.original is not None and self.original < 2:
            raise _refused("original_max_position_embeddings", f"L must be at least 2, got {self.original}")
        if kind == "llama3" and not 0 < self.low < self.high:
            raise _refused("high_freq_factor", f"need 0 < low_freq_factor < high_freq_factor: {self.low}, {self.high}")
        if kind == "yarn" and not 0 < self.slow < self.fast:
            raise _refused("beta_fast", f"need 0 < beta_slow < beta_fast, got {self.slow}, {self.fast}")
        if kind == "longrope" and (self.short_factor is None or self.long_factor is None):
            raise _refused("short_factor" if self.short_factor is None else "long_factor", "longrope needs both lists")
        if self.ramp not in (None, "code", "paper"):
            raise _refused("ramp", f"ramp is 'code' (the reference code's) or 'paper' (the paper's), got {self.ramp!r}")

    @property
    def original(self) -> int | None:
        return self.original_max_position_embeddings

    @property
    def low(self) -> float:
        return 1.0 if self.low_freq_factor is None else self.low_freq_factor

    @property
    def high(self) -> float:
        return 4.0 if self.high_freq_factor is None else self.high_freq_factor

    @property
    def fast(self) -> float:
        return self.beta_fast or 32.0  # Hugging Face's `or`: 0 means the default too

    @property
    def slow(self) -> float:
        return self.beta_slow or 1.0

    def check(self, width: int) -> None:
        """What only the rotated width decides: LongRoPE's factors are one per pair; NTK's exponent d/(d-2)."""
        if self.rope_type in ("ntk", "dynamic") and width <= 2:
            raise _refused("rope_type", f"{self.rope_type} raises the base by factor^(d/(d-2)): d must be above 2")
        for name in ("short_factor", "long_factor"):
            given = getattr(self, name)
            if given is not None and len(given) != width // 2:
                raise _refused(name, f"{name} has {len(given)} factors; a width of {width} has {width // 2} pairs")

    def given(self) -> dict[str, Any]:
        """The fields as given (None left out), lists as lists: what the answer echoes."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}
        return {k: list(v) if isinstance(v, tuple) else v for k, v in out.items()}

    @classmethod
    def coerce(cls, given: Scaling | dict | None) -> Scaling | None:
        if given is None or isinstance(given, Scaling):
            return given
        data = dict(given)
        kind, alias = data.pop("rope_type", None), data.pop("type", None)
        if kind is not None and alias is not None and kind != alias:
            raise _refused("type", f"rope_type {kind!r} and type {alias!r} disagree: give one")
        if kind is None and alias is None:
            raise _refused("rope_type", "say which scaling: rope_type (or type, its older name)")
        lists = {k: tuple(map(float, data[k])) for k in ("short_factor", "long_factor") if data.get(k) is not None}
        return cls(rope_type=kind or alias, **{**data, **lists})


def _refused(name: str, words: str) -> AttentionInputError:
    return AttentionInputError(words, field=f"rope.scaling.{name}")


@dataclass(frozen=True)
class Slip:
    """How a broken implementation does the scaling (the recipe's `scaling`)."""

    scaled: bool = True  # False: the scaling parsed, then ignored whole
    attention_factor: bool = True  # False: YaRN's or LongRoPE's factor left out of cos and sin
    turned: bool = False  # YaRN's ramp turned around: the fast pairs interpolated, the slow kept
    turn: float = 2 * math.pi  # Llama 3's wavelength is turn / theta: 1 without 2 pi


# The recipe's `scaling` (failure_modes.Recipe), as data.
SLIPS = {
    "applied": Slip(),
    "ignored": Slip(scaled=False),
    "no_attention_factor": Slip(attention_factor=False),
    "reversed": Slip(turned=True),
    "no_2pi": Slip(turn=1.0),
}


@dataclass(frozen=True)
class Frequencies:
    """Each pair's frequency at the model's base and as scaled, what happened to it, and the factor on
    cos and sin. `kept` is the share of the unscaled frequency a ramp or blend keeps (1 kept, 0 divided
    by the factor; NaN where the type has no such share)."""

    base: float  # the base the scaled thetas come from (ntk and dynamic raise it)
    original: np.ndarray  # [P] theta_i = base^(-2i/d)
    scaled: np.ndarray  # [P]
    kept: np.ndarray  # [P]
    attention_factor: float
    bounds: tuple[float, float] | None = None  # YaRN's low and high pairs

    def statuses(self) -> list[str]:
        """kept, blended (a share of each), divided (by the factor) or rescaled (by a rule of its own)."""
        ratio = self.scaled / self.original
        out = []
        for r, share in zip(ratio.tolist(), self.kept.tolist(), strict=True):
            if r == 1.0:
                out.append("kept")
            elif math.isnan(share):
                out.append("rescaled")
            else:
                out.append("kept" if share == 1.0 else "divided" if share == 0.0 else "blended")
        return out


def thetas(base: float, width: int) -> np.ndarray:
    return base ** (-np.arange(0, width, 2, dtype=np.float64) / width)  # [P]


def frequencies(base: float, scaling: Scaling | None, width: int, length: int, slip: str = "applied") -> Frequencies:
    """The frequencies of `width` rotated features at `base`, for a text whose last position is `length - 1`."""
    follows = scaling is not None and scaling.rope_type in ("dynamic", "longrope")
    return _frequencies(base, scaling, width, length if follows else 0, slip)


@lru_cache(maxsize=256)
def _frequencies(base: float, scaling: Scaling | None, width: int, length: int, slip: str) -> Frequencies:
    theta = thetas(base, width)
    how = SLIPS[slip]
    if scaling is None or not how.scaled:
        return _frozen(Frequencies(base, theta, theta, np.full(theta.shape, np.nan), 1.0))
    found = RULES[scaling.rope_type](theta, scaling, base, width, length, how)
    return _frozen(found if how.attention_factor else Frequencies(**{**found.__dict__, "attention_factor": 1.0}))


def _frozen(f: Frequencies) -> Frequencies:
    for a in (f.original, f.scaled, f.kept):
        a.flags.writeable = False  # shared by every call the cache serves
    return f


def _linear(theta, sc: Scaling, base, width, length, how) -> Frequencies:
    return Frequencies(base, theta, theta / sc.factor, np.zeros(theta.shape), 1.0)  # every pair divided


def _ntk(theta, sc: Scaling, base, width, length, how) -> Frequencies:
    return _rebased(theta, base, base * sc.factor ** (width / (width - 2)), width)


def _dynamic(theta, sc: Scaling, base, width, length, how) -> Frequencies:
    n, big = max(length, sc.original or 0), sc.original or 1
    return _rebased(theta, base, base * ((sc.factor * n / big) - (sc.factor - 1)) ** (width / (width - 2)), width)


def _rebased(theta, base: float, raised: float, width: int) -> Frequencies:
    return Frequencies(raised, theta, thetas(raised, width), np.full(theta.shape, np.nan), 1.0)


def _yarn(theta, sc: Scaling, base, width, length, how) -> Frequencies:
    big, bounds = sc.original or 1, None
    if sc.ramp == "paper":  # linear in r = L / wavelength between beta_slow and beta_fast
        r = big / (2 * math.pi / theta)
        kept = np.clip((r - sc.slow) / (sc.fast - sc.slow), 0.0, 1.0)
    else:  # the reference code's: linear in the pair's index between the bounds
        low, high = correction_range(sc, base, width)
        bounds = (low, high)
        kept = 1.0 - np.clip((np.arange(width // 2) - low) / ((high - low) or 0.001), 0.0, 1.0)
    kept = 1.0 - kept if how.turned else kept
    scaled = theta / sc.factor * (1.0 - kept) + theta * kept
    return Frequencies(base, theta, scaled, kept, attention_factor(sc), bounds)


def correction_range(sc: Scaling, base: float, width: int) -> tuple[float, float]:
    """YaRN's bounds: the pairs that turn beta_fast and beta_slow times over L (floored, ceiled)."""

    def pair(turns: float) -> float:
        return width * math.log((sc.original or 1) / (turns * 2 * math.pi)) / (2 * math.log(base))

    low, high = pair(sc.fast), pair(sc.slow)
    if sc.truncate is not False:
        low, high = math.floor(low), math.ceil(high)
    return max(low, 0), min(high, width - 1)


def _llama3(theta, sc: Scaling, base, width, length, how) -> Frequencies:
    big = sc.original or 1
    wavelength = how.turn / theta
    smooth = (big / wavelength - sc.low) / (sc.high - sc.low)
    kept = np.where(wavelength < big / sc.high, 1.0, np.where(wavelength > big / sc.low, 0.0, smooth))
    return Frequencies(base, theta, theta * kept + theta / sc.factor * (1.0 - kept), kept, 1.0)


def _longrope(theta, sc: Scaling, base, width, length, how) -> Frequencies:
    factors = np.asarray(sc.long_factor if length > (sc.original or 1) else sc.short_factor, dtype=np.float64)
    return Frequencies(base, theta, theta / factors, np.full(theta.shape, np.nan), attention_factor(sc))


def attention_factor(sc: Scaling | None) -> float:
    """What cos and sin are multiplied by: YaRN's 0.1 ln s + 1 (or the ratio of its two mscale forms),
    LongRoPE's sqrt(1 + ln s / ln L), or `attention_factor` as given; 1 for the other types."""
    if sc is None or sc.rope_type not in ("yarn", "longrope"):
        return 1.0
    if sc.attention_factor is not None:
        return sc.attention_factor
    if sc.rope_type == "longrope":
        return math.sqrt(1 + math.log(sc.factor) / math.log(sc.original or 2)) if sc.factor > 1 else 1.0

    def mscale(s: float, m: float = 1.0) -> float:
        return 1.0 if s <= 1 else 0.1 * m * math.log(s) + 1.0

    if sc.mscale and sc.mscale_all_dim:
        return mscale(sc.factor, sc.mscale) / mscale(sc.factor, sc.mscale_all_dim)
    return mscale(sc.factor)


RULES = {
    "linear": _linear,
    "ntk": _ntk,
    "dynamic": _dynamic,
    "yarn": _yarn,
    "llama3": _llama3,
    "longrope": _longrope,
}
