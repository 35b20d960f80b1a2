"""Schemas of the trained models' endpoints (responses: documentation only)."""

from __future__ import annotations

from marshmallow import Schema, ValidationError, fields, validate

from .attention import AttentionResponseSchema, HeadSchema, ShapeSchema, TraceOptionsSchema
from .fields import StrictInteger

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
