"""Schemas of speculative sampling: `POST /speculative/acceptance` and `POST /models/{id}/speculate`."""

from __future__ import annotations

import math

from marshmallow import Schema, ValidationError, fields, validate, validates_schema

from ...compute.failure_modes import REGISTRY
from ...compute.speculative import MAX_GAMMA
from .fields import SafeString, StrictFloat, StrictInteger
from .models import Text

# The slips of speculative sampling; on posted distributions there is no cache to leave unrolled.
SLIPS = sorted(m.id for m in REGISTRY.values() if m.step == "speculate")
RULE_SLIPS = [m for m in SLIPS if "decode" not in REGISTRY[m].needs]
MAX_VOCABULARY = 256
SUM_TOLERANCE = 1e-6


def _distribution(words: str) -> fields.List:
    return fields.List(
        StrictFloat(validate=validate.Range(min=0.0, max=1.0)),
        required=True,
        validate=validate.Length(min=2, max=MAX_VOCABULARY),
        metadata={"description": words},
    )


def _temperature() -> StrictFloat:
    return StrictFloat(
        load_default=1.0,
        validate=validate.Range(min=0.0, max=10.0),
        metadata={"description": "T: p^(1/T) normalised, for both; 0 is greedy (the likeliest token only)"},
    )


class AcceptanceRequestSchema(Schema):
    p = _distribution("the target's distribution over V tokens (summing to 1)")
    q = _distribution("the draft's distribution over the same V tokens (summing to 1)")
    temperature = _temperature()
    gamma = StrictInteger(
        load_default=4, validate=validate.Range(min=1, max=MAX_GAMMA), metadata={"description": "drafts per round"}
    )
    failure_mode = SafeString(
        validate=validate.OneOf(RULE_SLIPS), metadata={"description": "the rule as this slip applies it, beside it"}
    )

    @validates_schema
    def same_vocabulary(self, data, **kwargs):
        if len(data["p"]) != len(data["q"]):
            raise ValidationError(
                f"q has {len(data['q'])} tokens and p {len(data['p'])}: both are over one vocabulary", "q"
            )
        for name in ("p", "q"):
            total = math.fsum(data[name])
            if abs(total - 1.0) > SUM_TOLERANCE:
                raise ValidationError(f"{name} sums to {total:.9g}: a distribution sums to 1 (within 1e-6)", name)


class ExpectedSchema(Schema):
    gamma = fields.Integer()
    formula = fields.Float(metadata={"description": "(1 - alpha^(gamma + 1)) / (1 - alpha)"})
    enumerated = fields.Float(metadata={"description": "the same, summed over the accept/reject tree's leaves"})


class BrokenRuleSchema(Schema):
    emitted = fields.List(fields.Float(), metadata={"description": "what the slip emits, computed"})
    total_variation = fields.Float(metadata={"description": "TV(emitted, p): above 0 where the slip biases it"})


class AcceptanceSchema(Schema):
    temperature = fields.Float()
    p = fields.List(fields.Float(), metadata={"description": "p at the temperature"})
    q = fields.List(fields.Float(), metadata={"description": "q at the temperature"})
    acceptance = fields.List(fields.Float(), metadata={"description": "min(1, p/q) per token (1 where q is 0)"})
    alpha = fields.Float(metadata={"description": "sum min(p, q): the chance a draft is kept"})
    total_variation = fields.Float(metadata={"description": "TV(p, q) = 1 - alpha"})
    accepted = fields.List(fields.Float(), metadata={"description": "min(p, q): what accepted drafts emit"})
    residual = fields.List(fields.Float(), metadata={"description": "norm(max(0, p - q)): what a rejection draws"})
    emitted = fields.List(fields.Float(), metadata={"description": "accepted + (1 - alpha) residual: p, computed"})
    emitted_error = fields.Float(metadata={"description": "max |emitted - p| (float64 rounding)"})
    expected_tokens = fields.Nested(ExpectedSchema, metadata={"description": "tokens per target pass at gamma"})
    curve = fields.List(fields.Nested(ExpectedSchema), metadata={"description": "tokens per pass for gamma 1..16"})
    failure_mode = fields.String(allow_none=True)
    broken = fields.Nested(BrokenRuleSchema, allow_none=True)


class SpeculateRequestSchema(Schema):
    prompt = Text(required=True, metadata={"description": "the text to continue, as UTF-8 bytes"})
    gamma = StrictInteger(load_default=4, validate=validate.Range(min=1, max=8), metadata={"description": "drafts"})
    max_new_tokens = StrictInteger(
        load_default=32, validate=validate.Range(min=1, max=64), metadata={"description": "bytes to emit"}
    )
    temperature = _temperature()
    seed = StrictInteger(load_default=0, validate=validate.Range(min=0, max=2**32 - 1), metadata={"description": "rng"})
    draft = SafeString(
        load_default="lens",
        validate=validate.OneOf(["lens", "bigram"]),
        metadata={"description": "lens: the model's first layer through the final norm and W_U; bigram: the text's"},
    )
    failure_mode = SafeString(validate=validate.OneOf(SLIPS), metadata={"description": "a slip, beside the right"})


class ByteSchema(Schema):
    byte = fields.Integer()
    text = fields.String()


class DraftSchema(ByteSchema):
    u_draft = fields.Float(metadata={"description": "the uniform that drew it from q by inverse CDF"})
    q = fields.Float(metadata={"description": "q(x) at the temperature"})
    p = fields.Float(metadata={"description": "p(x) at the temperature, from the verification pass"})
    acceptance = fields.Float(metadata={"description": "min(1, p/q) (with the slip's q where it has one)"})
    u = fields.Float(metadata={"description": "the uniform drawn to accept"})
    accepted = fields.Boolean(metadata={"description": "absent: not verified (an earlier draft was rejected)"})


class EndingSchema(ByteSchema):
    kind = fields.String(metadata={"description": "resampled (after a rejection) or bonus (every draft kept)"})
    u = fields.Float()


class RoundCacheSchema(Schema):
    before = fields.Integer(metadata={"description": "rows each layer's cache held before the round"})
    verified = fields.Integer(metadata={"description": "rows after the verification block appended its gamma + 1"})
    after = fields.Integer(metadata={"description": "rows after the rollback"})
    accepted_prefix = fields.Integer(metadata={"description": "the positions before the next byte to verify"})


class PositionSchema(Schema):
    position = fields.Integer()
    total_variation = fields.Float(metadata={"description": "TV(emitted, p) at that position, computed"})


class TopSchema(ByteSchema):
    p = fields.Float()
    q = fields.Float(allow_none=True)


class RoundSchema(Schema):
    start = fields.Integer(metadata={"description": "the position of the last byte before the drafts"})
    drafts = fields.List(fields.Nested(DraftSchema))
    ending = fields.Nested(EndingSchema)
    emitted = fields.List(fields.Nested(ByteSchema))
    cache = fields.Nested(RoundCacheSchema)
    positions = fields.List(fields.Nested(PositionSchema), metadata={"description": "each verified position"})
    top = fields.List(fields.List(fields.Nested(TopSchema)), metadata={"description": "p's likeliest, with q"})


class DifferenceSchema(Schema):
    round = fields.Integer()
    what = fields.String(metadata={"description": "emitted (the distribution) or cache (the rows kept)"})
    total_variation = fields.Float()


class SpeculateSchema(Schema):
    model = fields.String()
    draft = fields.String()
    gamma = fields.Integer()
    temperature = fields.Float()
    seed = fields.Integer()
    failure_mode = fields.String(allow_none=True)
    prompt = fields.String()
    text = fields.String(metadata={"description": "the bytes emitted, printable as themselves, others as \\xNN"})
    tokens = fields.List(fields.Nested(ByteSchema))
    rounds = fields.List(fields.Nested(RoundSchema))
    target_passes = fields.Integer()
    drafted = fields.Integer()
    accepted = fields.Integer()
    tokens_per_pass = fields.Float()
    target_only = fields.List(
        fields.Nested(ByteSchema), allow_none=True, metadata={"description": "temperature 0: the target alone"}
    )
    first_difference = fields.Nested(DifferenceSchema, allow_none=True)
