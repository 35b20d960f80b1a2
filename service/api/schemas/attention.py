"""Request and response schemas of the compute endpoints (responses: documentation only)."""

from __future__ import annotations

from marshmallow import Schema, fields, validate

from ...compute import FAILURE_MODES, ROPE_STYLES
from ...compute.rope import MAX_OFFSET
from ...trace_json import INCLUDE_CHOICES
from .fields import Matrix, SafeString, StrictBoolean, StrictFloat, StrictInteger
from .rope import RopeScalingSchema


class ProjectionsSchema(Schema):
    query = Matrix(metadata={"description": "W_Q [d_model][d_model] (row vectors: Q = X @ W_Q)"})
    key = Matrix(metadata={"description": "W_K [d_model][kv_heads*d_head]"})
    value = Matrix(metadata={"description": "W_V [d_model][kv_heads*d_head]"})
    output = Matrix(metadata={"description": "W_O [d_model][d_model]"})


LONGEST = 1 << 20  # a window or sinks past any text a request may carry


class LatentSchema(Schema):
    """Multi-head latent attention (DeepSeek-V2): keys and values come from a latent per token."""

    down = Matrix(required=True, metadata={"description": "W_DKV [d_model][d_c]: C = X @ W_DKV, what a cache keeps"})
    up_key = Matrix(required=True, metadata={"description": "W_UK [d_c][heads*d_head]: K = C @ W_UK"})
    up_value = Matrix(required=True, metadata={"description": "W_UV [d_c][heads*d_head]: V = C @ W_UV"})
    rope_key = Matrix(
        metadata={
            "description": "W_KR [d_model][d_rope]: the decoupled RoPE key k_R = RoPE(X @ W_KR), one for every head"
        }
    )
    rope_query = Matrix(metadata={"description": "W_QR [d_model][heads*d_rope]: each head's decoupled RoPE query part"})
    absorbed = StrictBoolean(
        load_default=False,
        metadata={"description": "fold W_UK into the query and take the scores against the latent (the same numbers)"},
    )


class RopeSchema(Schema):
    style = SafeString(
        required=True,
        validate=validate.OneOf(sorted(ROPE_STYLES)),
        metadata={"description": "half (GPT-NeoX/Llama) or interleaved (GPT-J/RoFormer)"},
    )
    base = StrictFloat(load_default=10000.0, validate=validate.Range(min=1.0, min_inclusive=False, max=1e12))
    scaling = fields.Nested(RopeScalingSchema, metadata={"description": "how a model read past its training length"})
    offset = StrictInteger(
        load_default=0,
        validate=validate.Range(min=0, max=MAX_OFFSET),
        metadata={"description": "the first token's position (a decode continues from it)"},
    )


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
    latent = fields.Nested(
        LatentSchema,
        metadata={
            "description": "multi-head latent attention: keys and values from a latent (leave projections.key "
            "and projections.value out); rope then turns only the decoupled parts"
        },
    )
    failure_mode = SafeString(
        allow_none=True,
        validate=validate.OneOf(sorted(FAILURE_MODES)),
        metadata={"description": "compute what this broken implementation would"},
    )
    window = StrictInteger(
        validate=validate.Range(min=1, max=LONGEST),
        metadata={
            "description": "a sliding window W: query i sees key j when i - W < j <= i (W keys with itself, "
            "Hugging Face's convention; Mistral's paper counts W + 1); causal only"
        },
    )
    sinks = StrictInteger(
        load_default=0,
        validate=validate.Range(min=0, max=LONGEST),
        metadata={
            "description": "attention sinks S: the first S positions stay visible to every query beside its "
            "window (StreamingLLM); needs a window"
        },
    )
    sink_logit = fields.List(
        StrictFloat(),
        validate=validate.Length(min=1, max=4096),
        metadata={
            "description": "a learned sink logit per head (gpt-oss): joins each row's softmax denominator "
            "only, so a row's weights sum to less than one (each head's row_sums)"
        },
    )

    positions = SafeString(
        validate=validate.OneOf(["original", "cache"]),
        metadata={
            "description": "a rolling cache's RoPE positions: original (the text's, the default: the decode "
            "equals the windowed pass) or cache (StreamingLLM: keys cached before RoPE and turned by their place "
            "in the cache at each step; computed by decoding); needs a window and RoPE turning whole keys"
        },
    )


class DecodeRequestSchema(AttentionRequestSchema):
    prefill = StrictInteger(
        load_default=1,
        validate=validate.Range(min=1),
        metadata={
            "description": "how many first positions are computed at once (a prefill block), at most n; "
            "then one position a step"
        },
    )


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
    latent_query = fields.List(
        fields.List(fields.Float()),
        metadata={"description": "absorbed latent attention: the head's content query times W_UK,h^T [n][d_c]"},
    )
    latent_output = fields.List(
        fields.List(fields.Float()),
        metadata={"description": "absorbed latent attention: the head's weights times the latent, before W_UV,h"},
    )
    row_sums = fields.List(
        fields.Float(),
        metadata={"description": "under a sink logit: each row's weights summed, below one (the sink took the rest)"},
    )


class LongContextSchema(Schema):
    window = fields.Integer(allow_none=True, metadata={"description": "the sliding window W, null without one"})
    sinks = fields.Integer(metadata={"description": "the first positions every query sees beside its window"})
    sink_logit = fields.List(fields.Float(), allow_none=True, metadata={"description": "each head's sink logit"})
    positions = fields.String(metadata={"description": "original or cache (StreamingLLM's renumbering)"})


class CacheSchema(Schema):
    kind = fields.String(metadata={"description": "mha, gqa, mqa or mla: what a KV cache of this attention holds"})
    elements_per_token = fields.Integer(
        metadata={"description": "numbers one layer's cache keeps per token: 2 * kv_heads * d_head, or d_c + d_rope"}
    )
    elements = fields.Integer(
        metadata={
            "description": "numbers one layer's cache holds once the last position is in: elements_per_token "
            "times n, or under a window min(n, sinks + window) (cache_not_truncated keeps all n)"
        }
    )


class AttentionResponseSchema(Schema):
    shape = fields.Nested(ShapeSchema)
    conventions = fields.Dict(keys=fields.String(), values=fields.Raw())
    heads = fields.List(fields.Nested(HeadSchema))
    concat = Grid
    output = Grid
    residual = Grid
    cache = fields.Nested(CacheSchema)
    long_context = fields.Nested(
        LongContextSchema, metadata={"description": "present when the request gave a window or a sink logit"}
    )
    latent = fields.List(
        fields.List(fields.Float()), metadata={"description": "latent attention: C = X W_DKV [n][d_c]"}
    )
    rope_key = fields.List(
        fields.List(fields.Float()), metadata={"description": "latent attention: k_R after RoPE [n][d_rope]"}
    )


class DecodeHeadSchema(Schema):
    index = fields.Integer()
    kv_head = fields.Integer(metadata={"description": "the key/value head it reads (its own under latent attention)"})
    query = fields.List(fields.Float(), metadata={"description": "the new query (after RoPE at its position)"})
    key = fields.List(
        fields.Float(), metadata={"description": "the new key appended for its kv head (absent when absorbed)"}
    )
    value = fields.List(fields.Float())
    scores = fields.List(
        fields.Float(allow_none=True),
        metadata={"description": "over positions 0..position, scaled; null where this step did not attend"},
    )
    weights = fields.List(fields.Float(), metadata={"description": "over positions 0..position (position + 1 entries)"})
    output = fields.List(fields.Float())
    latent_query = fields.List(fields.Float(), metadata={"description": "absorbed latent attention: q W_UK,h^T"})


class DecodeCacheSchema(Schema):
    key = fields.List(
        Grid,
        metadata={
            "description": "[kv_heads][position + 1][d_head] after RoPE (with a window: per slot; under "
            "positions 'cache' before RoPE)"
        },
    )
    value = fields.List(Grid, metadata={"description": "[kv_heads][position + 1][d_head] (with a window: per slot)"})
    latent = Grid
    rope_key = Grid


class RopePositionsSchema(Schema):
    query = fields.Integer()
    keys = fields.List(
        fields.Integer(),
        metadata={
            "description": "in slot order, as cache_positions: the text's positions, or under 'cache' their places"
        },
    )


class DecodeStepSchema(Schema):
    position = fields.Integer()
    prefill = fields.Boolean(metadata={"description": "computed in the prefill block, with the positions before it"})
    heads = fields.List(fields.Nested(DecodeHeadSchema))
    concat = fields.List(fields.Float())
    output = fields.List(fields.Float())
    residual = fields.List(fields.Float())
    cache = fields.Nested(
        DecodeCacheSchema,
        metadata={
            "description": "what the cache holds once this position is in it: keys and values per kv head, "
            "or the latent (and RoPE key) under latent attention"
        },
    )
    cache_positions = fields.List(
        fields.Integer(),
        metadata={
            "description": "with a window: the positions the rolling cache holds, in slot order (at most "
            "sinks + window; position p >= sinks in slot sinks + (p - sinks) mod window)"
        },
    )
    cache_elements = fields.Integer(metadata={"description": "numbers in that cache (one layer)"})
    rope_positions = fields.Nested(
        RopePositionsSchema,
        metadata={"description": "with a window and RoPE: where this step turned its query and each cached key"},
    )


class DecodeResponseSchema(Schema):
    shape = fields.Nested(ShapeSchema)
    conventions = fields.Dict(keys=fields.String(), values=fields.Raw())
    cache = fields.Nested(CacheSchema)
    prefill = fields.Integer()
    steps = fields.List(fields.Nested(DecodeStepSchema))
    max_difference_from_full_pass = fields.Float(
        metadata={
            "description": "the largest difference between the decode and the full causal pass computed "
            "right (each key at its position in the text), over every number both hold: 0 up to float64 "
            "rounding unless a failure mode breaks it or positions 'cache' renumbers the keys after the cache "
            "first evicts"
        }
    )


class DifferencesSchema(Schema):
    weights = fields.List(Grid)
    head_outputs = fields.List(Grid)
    concat = Grid
    output = Grid
    residual = Grid
    max_abs = fields.Dict(keys=fields.String(), values=fields.Float())


class HeadDivergenceSchema(Schema):
    head = fields.Integer(metadata={"description": "0-based"})
    stages = fields.List(
        fields.String(), metadata={"description": "its differing stages (q, k, v, scores, weights, head-output)"}
    )


class DivergenceSchema(Schema):
    first = fields.String(
        allow_none=True,
        metadata={
            "description": "the first stage whose numbers differ (x, q, k, v, scores, weights, head-output, "
            "concat, wo, output, residual); null when none does"
        },
    )
    stages = fields.List(fields.String(), metadata={"description": "every stage whose numbers differ, in order"})
    first_head = fields.Integer(
        allow_none=True,
        metadata={"description": "the 0-based head of the first difference, for a per-head stage; null otherwise"},
    )
    heads = fields.List(
        fields.Nested(HeadDivergenceSchema),
        metadata={"description": "each head's own differing stages: an identical head has none"},
    )


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


class PresetSummarySchema(Schema):
    id = fields.String()
    endpoint = fields.String(metadata={"description": "the operation the preset is a request body for"})
    title = fields.String()
    description = fields.String()


class PresetSchema(PresetSummarySchema):
    patterns = fields.List(fields.String())
    request = fields.Dict(
        keys=fields.String(),
        values=fields.Raw(),
        metadata={
            "description": "a request body for `endpoint` (POST /attention, /attention/decode or /attention/tiled)"
        },
    )


class PresetListSchema(Schema):
    presets = fields.List(fields.Nested(PresetSummarySchema))
