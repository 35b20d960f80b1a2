"""Schemas of the RoPE frequency calculator: `GET /rope/presets`, `POST /rope/frequencies`."""

from __future__ import annotations

import json

from marshmallow import Schema, ValidationError, fields, validate

from ...compute.failure_modes import REGISTRY
from ...compute.scaling import SCALINGS
from ...config import ROOT
from .fields import SafeString, StrictBoolean, StrictFloat, StrictInteger


def _positive(most: float, words: str) -> StrictFloat:
    return StrictFloat(validate=validate.Range(min=0.0, min_inclusive=False, max=most), metadata={"description": words})


def _factors(words: str) -> fields.List:
    return fields.List(
        StrictFloat(validate=validate.Range(min=0.0, min_inclusive=False, max=1e6)),
        validate=validate.Length(min=1, max=4096),
        metadata={"description": words},
    )


class RopeScalingSchema(Schema):
    """A model's `rope_scaling`, with Hugging Face's names (docs/conventions.md, "RoPE scaling")."""

    rope_type = SafeString(validate=validate.OneOf(sorted(SCALINGS)), metadata={"description": "which scaling"})
    type = SafeString(validate=validate.OneOf(sorted(SCALINGS)), metadata={"description": "rope_type's older name"})
    factor = StrictFloat(validate=validate.Range(min=1.0, max=1e6), metadata={"description": "s: the length ratio"})
    original_max_position_embeddings = StrictInteger(
        validate=validate.Range(min=2, max=1 << 30), metadata={"description": "L: the length the model was trained on"}
    )
    beta_fast = _positive(1e6, "yarn: the turns over L above which a pair is kept (32)")
    beta_slow = _positive(1e6, "yarn: the turns over L below which a pair is divided (1)")
    truncate = StrictBoolean(metadata={"description": "yarn: floor and ceil the ramp's bounds (true)"})
    mscale = StrictFloat(validate=validate.Range(min=0.0, max=1e6), metadata={"description": "yarn (DeepSeek)"})
    mscale_all_dim = StrictFloat(validate=validate.Range(min=0.0, max=1e6), metadata={"description": "yarn"})
    attention_factor = _positive(1e3, "yarn, longrope: what cos and sin are multiplied by, instead of the rule's")
    low_freq_factor = _positive(1e6, "llama3: wavelengths over L / low_freq_factor are divided (1)")
    high_freq_factor = _positive(1e6, "llama3: wavelengths under L / high_freq_factor are kept (4)")
    short_factor = _factors("longrope: each pair's divisor while the length is at most L")
    long_factor = _factors("longrope: each pair's divisor past L")
    ramp = SafeString(
        validate=validate.OneOf(["code", "paper"]),
        metadata={"description": "yarn: the reference code's ramp (by pair index, the default) or the paper's"},
    )


# Released models' RoPE as their published configurations state it, each with its source.
ROPE_MODELS: dict[str, dict] = {
    m["id"]: m for m in json.loads((ROOT / "service" / "rope_models.json").read_text())["models"]
}


# The slips the calculator shows: the failure modes that change how the scaling is done (Recipe.scaling).
SLIPS = sorted(m.id for m in REGISTRY.values() if "scaling" in m.change)


def even(width: int) -> None:
    if width % 2:
        raise ValidationError(f"RoPE turns pairs of features: {width} is odd")


class FrequenciesRequestSchema(Schema):
    preset = SafeString(
        validate=validate.OneOf(sorted(ROPE_MODELS)),
        metadata={"description": "a released model's RoPE (GET /rope/presets); any field given here replaces its"},
    )
    head_dim = StrictInteger(
        validate=[validate.Range(min=2, max=4096), even],
        metadata={"description": "the rotated width d (even; default: the preset's, else 128)", "multipleOf": 2},
    )
    base = StrictFloat(validate=validate.Range(min=1.0, min_inclusive=False, max=1e12), metadata={"description": "b"})
    scaling = fields.Nested(
        RopeScalingSchema, metadata={"description": "the model's rope_scaling (its fields replace a preset's)"}
    )
    length = StrictInteger(
        validate=validate.Range(min=1, max=1 << 30),
        metadata={
            "description": "the sequence's length (its last position + 1), which dynamic and longrope follow; "
            "default: the preset's context, else original_max_position_embeddings, else 1"
        },
    )
    failure_mode = SafeString(
        validate=validate.OneOf(SLIPS), metadata={"description": "the frequencies as this slip computes them"}
    )


class PairSchema(Schema):
    pair = fields.Integer()
    inv_freq = fields.Float(metadata={"description": "theta_i = base^(-2i/d) at the model's base"})
    scaled_inv_freq = fields.Float(metadata={"description": "theta_i as the scaling sets it"})
    wavelength = fields.Float(metadata={"description": "2 pi / theta_i, in positions"})
    scaled_wavelength = fields.Float()
    ratio = fields.Float(metadata={"description": "scaled / original"})
    status = fields.String(metadata={"description": "kept, blended, divided (by the factor) or rescaled"})
    kept_share = fields.Float(
        allow_none=True, metadata={"description": "yarn, llama3: the share of the original frequency kept"}
    )


class FrequenciesSchema(Schema):
    width = fields.Integer()
    length = fields.Integer()
    base = fields.Float(metadata={"description": "the base the scaled frequencies come from (ntk, dynamic raise it)"})
    attention_factor = fields.Float(metadata={"description": "what cos and sin are multiplied by"})
    yarn_bounds = fields.List(fields.Float(), allow_none=True, metadata={"description": "yarn: low and high pairs"})
    pairs = fields.List(fields.Nested(PairSchema))


class FrequenciesResponseSchema(FrequenciesSchema):
    preset = fields.String(allow_none=True)
    source = fields.String(allow_none=True)
    model_base = fields.Float(metadata={"description": "the unscaled base the model started from"})
    scaling = fields.Dict(allow_none=True, metadata={"description": "the scaling as computed"})
    failure_mode = fields.String(allow_none=True)
    ntk_aware_base = fields.Float(
        allow_none=True, metadata={"description": "base * factor^(d/(d-2)): NTK-aware scaling's base at this factor"}
    )


class RopeModelSchema(Schema):
    id = fields.String()
    name = fields.String()
    head_dim = fields.Integer()
    base = fields.Float()
    context = fields.Integer(metadata={"description": "the length the scaled model reads"})
    scaling = fields.Dict()
    source = fields.String()


class RopeModelListSchema(Schema):
    presets = fields.List(fields.Nested(RopeModelSchema))
