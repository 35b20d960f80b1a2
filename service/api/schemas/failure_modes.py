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
    needs = fields.String(
        allow_none=True,
        metadata={"description": "what a request must give for it to show (a 422 says so otherwise): window, sinks, "
                  "sink_logit or positions (positions 'cache' with RoPE); null when nothing"},
    )  # fmt: skip


class FailureModesSchema(Schema):
    failure_modes = fields.List(fields.Nested(FailureModeSchema))
