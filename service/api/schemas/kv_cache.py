"""Schemas of the KV cache's memory: `GET /kv-cache/presets`, `POST /kv-cache`."""

from __future__ import annotations

from marshmallow import Schema, fields, validate

from ...compute.cache_memory import MOST_BYTES
from .fields import StrictBoolean, StrictFloat, StrictInteger

# Bounds that keep every answer an exact JSON number (the service checks the product too).
LIMITS = {"layers": 1024, "heads": 1024, "d_head": 4096, "d_c": 65536, "d_rope": 4096, "tokens": 100_000_000}


class LatentShapeSchema(Schema):
    d_c = StrictInteger(
        required=True,
        validate=validate.Range(min=1, max=LIMITS["d_c"]),
        metadata={"description": "the latent's width: what the cache keeps per token"},
    )
    d_rope = StrictInteger(
        load_default=0,
        validate=validate.Range(min=0, max=LIMITS["d_rope"]),
        metadata={"description": "the decoupled RoPE key's width, cached beside it (0: none)"},
    )


class LayerPatternSchema(Schema):
    local_per_global = StrictInteger(
        required=True,
        validate=validate.Range(min=1, max=LIMITS["layers"]),
        metadata={"description": "windowed layers per full one: 1 alternates (Gemma 2, gpt-oss), 5 is Gemma 3"},
    )
    global_first = StrictBoolean(load_default=False, metadata={"description": "the pattern starts with the full layer"})


class CacheRequestSchema(Schema):
    layers = StrictInteger(required=True, validate=validate.Range(min=1, max=LIMITS["layers"]))
    heads = StrictInteger(
        required=True, validate=validate.Range(min=1, max=LIMITS["heads"]), metadata={"description": "query heads"}
    )
    kv_heads = StrictInteger(
        validate=validate.Range(min=1, max=LIMITS["heads"]),
        metadata={"description": "key/value heads (divides heads); omitted: one per head"},
    )
    d_head = StrictInteger(required=True, validate=validate.Range(min=1, max=LIMITS["d_head"]))
    latent = fields.Nested(LatentShapeSchema, metadata={"description": "multi-head latent attention"})
    window = StrictInteger(
        validate=validate.Range(min=1, max=LIMITS["tokens"]),
        metadata={"description": "a sliding window: a windowed layer caches at most this many positions (and sinks)"},
    )
    sinks = StrictInteger(
        validate=validate.Range(min=0, max=LIMITS["tokens"]),
        metadata={"description": "attention sinks: the first positions a windowed layer keeps too (S + W cached)"},
    )
    layer_pattern = fields.Nested(
        LayerPatternSchema,
        metadata={"description": "local (windowed) and global layers; omitted with a window: every layer windowed"},
    )
    bytes_per_element = StrictFloat(
        required=True,
        validate=validate.Range(min=0, min_inclusive=False, max=MOST_BYTES),
        metadata={
            "description": "the bytes of one cached number: 0.5 (int4), 1 (fp8, int8), 2 (bf16, fp16), 4 (fp32), "
            "8 (fp64), or any other above 0 and up to 8"
        },
    )
    tokens = StrictInteger(
        required=True,
        validate=validate.Range(min=1, max=LIMITS["tokens"]),
        metadata={"description": "the context: positions in the cache"},
    )


class Exact(fields.Field):
    """A number as the service computed it: a whole number stays whole (bytes of half-byte elements may not be)."""

    def __init__(self, **kwargs):
        super().__init__(metadata={"type": "number", **kwargs.pop("metadata", {})}, **kwargs)

    def _serialize(self, value, attr, obj, **kwargs):
        return value


class LayerKindSchema(Schema):
    layers = fields.Integer()
    positions_cached = fields.Integer(metadata={"description": "the positions each layer of the kind keeps"})
    elements_per_token = fields.Integer(metadata={"description": "what one position costs over the kind's layers"})
    bytes_per_token = Exact(metadata={"description": "the same in bytes: times positions_cached, the kind's bytes"})
    bytes = Exact()


class LayersSchema(Schema):
    local = fields.Nested(LayerKindSchema, metadata={"description": "the windowed layers"})
    global_ = fields.Nested(
        LayerKindSchema, data_key="global", attribute="global", metadata={"description": "the full layers"}
    )


class MhaEquivalentSchema(Schema):
    elements_per_token = fields.Integer()
    bytes_total = Exact()


class CacheResponseSchema(Schema):
    kind = fields.String(metadata={"description": "mha, gqa, mqa or mla"})
    elements_per_token_per_layer = fields.Integer()
    elements_per_token = fields.Integer(
        metadata={"description": "every layer's, as DeepSeek-V2's Table 1 counts (under a window: see layers)"}
    )
    bytes_per_token = Exact()
    positions_cached = fields.Integer(metadata={"description": "tokens, or the sliding window when shorter"})
    bytes_total = Exact(metadata={"description": "the cache for the whole context, every layer"})
    mha_equivalent = fields.Nested(
        MhaEquivalentSchema, metadata={"description": "the same heads with keys and values of their own"}
    )
    ratio_to_mha = fields.Float()
    layers = fields.Nested(LayersSchema, metadata={"description": "with a window: the cache by kind of layer"})
    bytes_if_every_layer_global = Exact(metadata={"description": "with a window: the same cache without it"})
    reach = fields.Integer(
        allow_none=True,
        metadata={"description": "with every layer windowed: how far back information travels, L(W - 1) + 1"},
    )


class ModelConfigSchema(Schema):
    id = fields.String()
    name = fields.String()
    request = fields.Nested(CacheRequestSchema, metadata={"description": "a body for POST /kv-cache"})
    context = fields.Integer(metadata={"description": "the longest context it was released for"})
    source = fields.String(metadata={"description": "where the configuration is published"})
    note = fields.String()


class ModelConfigListSchema(Schema):
    presets = fields.List(fields.Nested(ModelConfigSchema))
