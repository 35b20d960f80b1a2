"""Schema of the failure-mode registry."""

from __future__ import annotations

from marshmallow import Schema, fields


class FailureModeSchema(Schema):
    id = fields.String()
    name = fields.String(metadata={"description": "short, for people"})
    description = fields.String(metadata={"description": "what the broken code does"})
    advice = fields.String(metadata={"description": "what the checker tells a learner who made it"})
    step = fields.String(
        metadata={
            "description": "the pipeline step it breaks: split, kv, rope, scale, mask, cache, concat, output, "
            "online (the online softmax)"
        }
    )
    engine = fields.Boolean(metadata={"description": "POST /attention computes it as failure_mode"})
    decoding = fields.Boolean(
        metadata={"description": "only decoding with a KV cache makes it (POST /attention/decode computes it)"}
    )
    tiled = fields.Boolean(
        metadata={"description": "only the online softmax makes it, tile by tile (POST /attention/tiled computes it)"}
    )
    needs = fields.List(
        fields.String(),
        metadata={
            "description": "what a request must hold for it to differ from the correct computation: decode (a decode "
            "with a KV cache, causal), head_slices (keys and values split per head, not made from a latent), "
            "whole_cache (no window, sinks or sink logit), window, sinks, sink_logit, positions (positions 'cache'), "
            "grouped_heads (kv_heads below heads), several_heads, rope, whole_keys (RoPE on whole keys, not a "
            "latent's), causal (a causal mask), output_projection (a W_O other than the identity). Without one of "
            "the first seven POST /attention answers 422 saying so; without the others it computes the same "
            "numbers as the correct code"
        },
    )


class FailureModesSchema(Schema):
    failure_modes = fields.List(fields.Nested(FailureModeSchema))
