"""Schemas of the trained models' endpoints (responses: documentation only)."""

from __future__ import annotations

from marshmallow import Schema, ValidationError, fields, validate

from .attention import AttentionResponseSchema, HeadSchema, ShapeSchema, TraceOptionsSchema
from .fields import StrictBoolean, StrictInteger

TEXT_CONTROLS = {"\t", "\n", "\r"}  # what text typed or pasted holds; any other control character is refused


class Text(fields.String):
    """A non-empty string without control characters other than tab, newline and carriage
    return; the model reads its UTF-8 bytes."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, str):
            raise ValidationError(f"must be a string, got {type(value).__name__.replace('NoneType', 'null')}")
        if not value:
            raise ValidationError("must hold at least one character")
        bad = next(
            (i for i, c in enumerate(value) if (ord(c) < 32 or 127 <= ord(c) < 160) and c not in TEXT_CONTROLS), None
        )
        if bad is not None:
            raise ValidationError(
                f"character {bad + 1} (counting from 1) is the control character U+{ord(value[bad]):04X}; "
                "text may hold tab, newline and carriage return, no other control character"
            )
        return value


class HeadRefSchema(Schema):
    layer = StrictInteger(required=True, validate=validate.Range(min=0), metadata={"description": "0-based"})
    head = StrictInteger(required=True, validate=validate.Range(min=0), metadata={"description": "0-based"})


class ModelAttentionRequestSchema(TraceOptionsSchema):
    text = Text(required=True, metadata={"description": "what the model reads, as UTF-8 bytes (at most `context`)"})
    top = StrictInteger(
        load_default=5, validate=validate.Range(min=1, max=256), metadata={"description": "next-byte predictions"}
    )
    ablate = fields.List(
        fields.Nested(HeadRefSchema),
        load_default=list,
        validate=validate.Length(max=64),
        metadata={
            "description": "heads to switch off (0-based layer and head): their outputs are zeroed before W_O and "
            "the rest of the model computed as usual; each head's pattern scores are then measured again"
        },
    )


class PatternScoresSchema(Schema):
    """The byte model's four patterns, or the encoder's five (previous, next, [CLS], [SEP], self)."""

    previous_token = fields.Float(metadata={"description": "mean weight from each position to the one before"})
    induction = fields.Float(
        metadata={
            "description": "byte model, on a sequence typed twice: mean weight to the byte after the earlier "
            "occurrence of its own"
        }
    )
    first_token = fields.Float(metadata={"description": "byte model: mean weight to the first position"})
    next_token = fields.Float(metadata={"description": "encoder: mean weight from each word piece to the next"})
    cls = fields.Float(metadata={"description": "encoder: mean weight from each word piece to [CLS]"})
    sep = fields.Float(metadata={"description": "encoder: mean weight from each word piece to [SEP]"})
    self = fields.Float(metadata={"description": "mean weight to the position itself"})


class ModelHeadSchema(Schema):
    index = fields.Integer(metadata={"description": "0-based; people count from 1"})
    label = fields.String(metadata={"description": "the pattern it scores highest on, or 'no single pattern'"})
    pattern_scores = fields.Nested(PatternScoresSchema)


class ModelSchema(Schema):
    id = fields.String()
    description = fields.String()
    causal = fields.Boolean(metadata={"description": "whether a position sees only itself and those before it"})
    reads = fields.String(metadata={"description": "what one position is: a byte, or a word piece"})
    layers = fields.Integer()
    heads = fields.Integer()
    d_model = fields.Integer()
    context = fields.Integer(metadata={"description": "the most positions (bytes, or word pieces) it reads"})
    licence = fields.Dict(keys=fields.String(), values=fields.String())
    measured_on = fields.String(metadata={"description": "the sequences the pattern scores come from"})
    layer_heads = fields.List(fields.List(fields.Nested(ModelHeadSchema)), metadata={"description": "[layer][head]"})


class ModelListSchema(Schema):
    models = fields.List(fields.Nested(ModelSchema))


class TokenSchema(Schema):
    index = fields.Integer()
    byte = fields.Integer(metadata={"description": "byte model: the byte"})
    id = fields.Integer(metadata={"description": "encoder: the word piece's id in the vocabulary"})
    start = fields.Integer(metadata={"description": "encoder: where the piece starts in the text (characters)"})
    end = fields.Integer(metadata={"description": "encoder: where it ends, exclusive ((0, 0): [CLS] and [SEP])"})
    text = fields.String(
        metadata={
            "description": "a byte: printable ASCII as itself, any other as \\xNN; a word piece as the vocabulary "
            "spells it (## continues a word)"
        }
    )


class PredictionSchema(TokenSchema):
    probability = fields.Float()


class AblationScoresSchema(Schema):
    intact = fields.Nested(PatternScoresSchema, metadata={"description": "every head on"})
    ablated = fields.Nested(PatternScoresSchema, metadata={"description": "the `ablate` heads off"})


class TracedHeadSchema(HeadSchema):
    label = fields.String()
    pattern_scores = fields.Nested(PatternScoresSchema)
    off = fields.Boolean(metadata={"description": "switched off by `ablate`: its output is zero"})
    ablation = fields.Nested(
        AblationScoresSchema,
        metadata={"description": "with `ablate`: this head's scores with and without them, on the same sequences"},
    )


class LayerSchema(AttentionResponseSchema):
    index = fields.Integer()
    heads = fields.List(fields.Nested(TracedHeadSchema))


class ModelTraceSchema(Schema):
    model = fields.String()
    ablated = fields.List(fields.Nested(HeadRefSchema), metadata={"description": "the heads switched off"})
    ablation_measured_on = fields.String(metadata={"description": "the sequences `ablation` scores come from"})
    tokens = fields.List(fields.Nested(TokenSchema))
    shape = fields.Nested(ShapeSchema)
    layers = fields.List(fields.Nested(LayerSchema))
    next = fields.List(
        fields.Nested(PredictionSchema), metadata={"description": "byte model: the likeliest next bytes"}
    )
    after = fields.List(
        fields.List(fields.Nested(PredictionSchema)),
        metadata={"description": "after[i]: the likeliest bytes after byte i (0-based), had the text ended there"},
    )


def _slips(*steps: str) -> list[str]:
    """The registry's pitfalls of reading a model at `steps` (lens, patch, gradient)."""
    from ...compute.failure_modes import REGISTRY

    return sorted(m.id for m in REGISTRY.values() if m.step in steps)


class LensRequestSchema(Schema):
    text = Text(required=True, metadata={"description": "what the model reads, as UTF-8 bytes (at most `context`)"})
    top = StrictInteger(load_default=5, validate=validate.Range(min=1, max=16), metadata={"description": "bytes"})
    failure_mode = fields.String(
        validate=validate.OneOf(_slips("lens")), metadata={"description": "the lens as the pitfall reads it"}
    )


class ByteProbabilitySchema(Schema):
    byte = fields.Integer()
    text = fields.String()
    probability = fields.Float()


class NextByteSchema(ByteProbabilitySchema):
    rank = fields.Integer(metadata={"description": "1: the likeliest byte"})


class LensPositionSchema(Schema):
    position = fields.Integer()
    top = fields.List(fields.Nested(ByteProbabilitySchema))
    next = fields.Nested(NextByteSchema, allow_none=True, metadata={"description": "the byte that comes next"})


class LensLayerSchema(Schema):
    layer = fields.Integer(metadata={"description": "0: the embedding; l: the stream after layer l"})
    positions = fields.List(fields.Nested(LensPositionSchema))


class LensHeadSchema(Schema):
    layer = fields.Integer()
    head = fields.Integer()
    label = fields.String()
    positions = fields.List(fields.Nested(LensPositionSchema))


class LensDifferenceSchema(Schema):
    layer = fields.Integer()
    position = fields.Integer()
    right = fields.Nested(LensPositionSchema)
    broken = fields.Nested(LensPositionSchema)


class LensSchema(Schema):
    model = fields.String()
    tokens = fields.List(fields.Nested(TokenSchema))
    norm = fields.String(metadata={"description": "how each stream is read"})
    failure_mode = fields.String(allow_none=True)
    layers = fields.List(fields.Nested(LensLayerSchema), metadata={"description": "the embedding, then each layer"})
    heads = fields.List(fields.Nested(LensHeadSchema), metadata={"description": "each head's write, read alike"})
    first_difference = fields.Nested(LensDifferenceSchema, allow_none=True)


class MetricSchema(Schema):
    kind = fields.String(required=True, validate=validate.OneOf(["logit_difference", "probability"]))
    bytes = fields.List(
        StrictInteger(validate=validate.Range(min=0, max=255)),
        validate=validate.Length(equal=2),
        metadata={"description": "logit_difference: [a, b], measured as z_a - z_b at the last position"},
    )
    byte = StrictInteger(validate=validate.Range(min=0, max=255), metadata={"description": "probability: the byte a"})


class PatchRequestSchema(Schema):
    clean = Text(required=True, validate=validate.Length(max=64), metadata={"description": "at most 64 bytes"})
    corrupted = Text(required=True, validate=validate.Length(max=64), metadata={"description": "as long, in bytes"})
    metric = fields.Nested(MetricSchema, required=True)
    component = fields.String(
        load_default="head_output",
        validate=validate.OneOf(["residual", "head_output"]),
        metadata={"description": "the stream at (layer, position), or a head's output at (layer, head, position)"},
    )
    estimate = StrictBoolean(load_default=False, metadata={"description": "attribution patching's estimates too"})
    failure_mode = fields.String(
        validate=validate.OneOf(_slips("patch", "gradient")), metadata={"description": "a pitfall, beside the right"}
    )


class PatchSideSchema(Schema):
    text = fields.String()
    metric = fields.Float()


class FlagSchema(Schema):
    cell = fields.List(fields.Integer())
    why = fields.String()
    weight = fields.Dict(metadata={"description": "the attention weight that moved most in the patched run"})


class PatchSchema(Schema):
    model = fields.String()
    component = fields.String()
    failure_mode = fields.String(allow_none=True)
    clean = fields.Nested(PatchSideSchema)
    corrupted = fields.Nested(PatchSideSchema)
    shape = fields.List(fields.Integer(), metadata={"description": "[L + 1, n] or [L, H, n]"})
    patched = fields.Raw(metadata={"description": "the metric with each cell patched, in the grid's shape"})
    effect = fields.Raw(metadata={"description": "patched minus corrupted"})
    estimate = fields.Raw(allow_none=True, metadata={"description": "(a_clean - a_corrupted) . dm/da"})
    recovered = fields.Raw(allow_none=True, metadata={"description": "estimate / effect (null where it is 0)"})
    flagged = fields.List(fields.Nested(FlagSchema))
    correct = fields.Dict(metadata={"description": "with a pitfall: the right effect and estimate"})
    first_difference = fields.Dict(allow_none=True)
