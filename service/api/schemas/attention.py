"""Request and response schemas of the compute endpoints (responses: documentation only)."""

from __future__ import annotations

from flask import current_app
from marshmallow import Schema, fields, pre_load, validate

from ...compute import FAILURE_MODES, ROPE_STYLES
from ...trace_json import INCLUDE_CHOICES
from ..attention.caps import refuse_over_caps
from .fields import Matrix, SafeString, StrictBoolean, StrictFloat, StrictInteger


class ProjectionsSchema(Schema):
    query = Matrix(metadata={"description": "W_Q [d_model][d_model] (row vectors: Q = X @ W_Q)"})
    key = Matrix(metadata={"description": "W_K [d_model][kv_heads*d_head]"})
    value = Matrix(metadata={"description": "W_V [d_model][kv_heads*d_head]"})
    output = Matrix(metadata={"description": "W_O [d_model][d_model]"})


class RopeSchema(Schema):
    style = SafeString(
        required=True,
        validate=validate.OneOf(sorted(ROPE_STYLES)),
        metadata={"description": "half (GPT-NeoX/Llama) or interleaved (GPT-J/RoFormer)"},
    )
    base = StrictFloat(load_default=10000.0, validate=validate.Range(min=1.0, min_inclusive=False, max=1e12))


class TraceOptionsSchema(Schema):
    """What a trace returns: every compute endpoint takes these."""

    include = fields.List(
        SafeString(validate=validate.OneOf(INCLUDE_CHOICES)),
        validate=validate.Length(min=1, max=len(INCLUDE_CHOICES)),
        metadata={"description": "parts to return (default: all)"},
    )
    precision = StrictInteger(
        validate=validate.Range(min=0, max=15), metadata={"description": "round returned numbers to this many decimals"}
    )


class AttentionRequestSchema(TraceOptionsSchema):
    tokens = Matrix(required=True, metadata={"description": "X [n][d_model]: one row per position"})
    heads = StrictInteger(required=True, validate=validate.Range(min=1), metadata={"description": "H"})
    causal = StrictBoolean(load_default=True)
    projections = fields.Nested(ProjectionsSchema, metadata={"description": "omitted matrices are the identity"})
    kv_heads = StrictInteger(
        validate=validate.Range(min=1),
        metadata={"description": "grouped-query attention: key/value heads (divides heads)"},
    )
    rope = fields.Nested(RopeSchema, allow_none=True)
    failure_mode = SafeString(
        allow_none=True,
        validate=validate.OneOf(sorted(FAILURE_MODES)),
        metadata={"description": "compute what this broken implementation would"},
    )

    @pre_load
    def _caps_first(self, data, **kwargs):
        refuse_over_caps(data, current_app.extensions["settings"])  # before any element is parsed or array made
        return data


class CompareRequestSchema(AttentionRequestSchema):
    failure_mode = SafeString(
        required=True,
        validate=validate.OneOf(sorted(FAILURE_MODES)),
        metadata={"description": "the broken implementation to compare with"},
    )


Grid = fields.List(fields.List(fields.Float()))
NullableGrid = fields.List(fields.List(fields.Float(allow_none=True)))


class ShapeSchema(Schema):
    n = fields.Integer()
    d_model = fields.Integer()
    heads = fields.Integer()
    d_head = fields.Integer()
    kv_heads = fields.Integer()


class SummarySchema(Schema):
    row_entropy = fields.List(fields.Float(), metadata={"description": "nats per query row"})
    argmax = fields.List(fields.Integer(), metadata={"description": "key with the largest weight per row"})
    max_weight = fields.List(fields.Float())
    column_mass = fields.List(fields.Float(), metadata={"description": "share of all attention each key receives"})


class HeadSchema(Schema):
    index = fields.Integer()
    features = fields.List(
        fields.Integer(),
        allow_none=True,
        metadata={"description": "[start, end) of the query features, null if not contiguous"},
    )
    feature_indices = fields.List(fields.Integer())
    kv_head = fields.Integer()
    query = Grid
    key = Grid
    value = Grid
    query_before_rope = fields.List(
        fields.List(fields.Float()), metadata={"description": "with RoPE on: the query slice before its rotation"}
    )
    key_before_rope = fields.List(
        fields.List(fields.Float()), metadata={"description": "with RoPE on: the key slice before its rotation"}
    )
    scores = fields.List(fields.List(fields.Float()), metadata={"description": "scaled, before masking"})
    masked_scores = NullableGrid
    weights = Grid
    output = Grid
    summary = fields.Nested(SummarySchema)


class AttentionResponseSchema(Schema):
    shape = fields.Nested(ShapeSchema)
    conventions = fields.Dict(keys=fields.String(), values=fields.Raw())
    heads = fields.List(fields.Nested(HeadSchema))
    concat = Grid
    output = Grid
    residual = Grid


class DifferencesSchema(Schema):
    weights = fields.List(Grid)
    head_outputs = fields.List(Grid)
    concat = Grid
    output = Grid
    residual = Grid
    max_abs = fields.Dict(keys=fields.String(), values=fields.Float())


class DivergenceSchema(Schema):
    first = fields.String(
        allow_none=True,
        metadata={
            "description": "the first stage whose numbers differ (x, q, k, v, scores, weights, head-output, "
            "concat, wo, output, residual); null when none does"
        },
    )
    stages = fields.List(fields.String(), metadata={"description": "every stage whose numbers differ, in order"})


class CompareResponseSchema(Schema):
    failure_mode = fields.Dict(keys=fields.String(), values=fields.String())
    correct = fields.Nested(AttentionResponseSchema)
    broken = fields.Nested(AttentionResponseSchema)
    differences = fields.Nested(DifferencesSchema, metadata={"description": "broken minus correct, per cell"})
    divergence = fields.Nested(
        DivergenceSchema,
        metadata={
            "description": "where broken parts from correct; 'wo' is the output projection applied "
            "(skipping it applies the identity)"
        },
    )


class PresetSchema(Schema):
    id = fields.String()
    title = fields.String()
    description = fields.String()
    patterns = fields.List(fields.String())
    request = fields.Nested(AttentionRequestSchema)


class PresetSummarySchema(Schema):
    id = fields.String()
    title = fields.String()
    description = fields.String()


class PresetListSchema(Schema):
    presets = fields.List(fields.Nested(PresetSummarySchema))
