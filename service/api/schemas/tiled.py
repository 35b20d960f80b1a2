"""`POST /attention/tiled`: the attention body with the tiles' sizes, and the tiles' answer (documentation only)."""

from __future__ import annotations

from marshmallow import Schema, fields, validate

from ...compute.online import SLIPS
from .attention import LONGEST, AttentionRequestSchema, Grid
from .fields import SafeString, StrictInteger


def _block(name: str, what: str) -> StrictInteger:
    return StrictInteger(
        required=True,
        validate=validate.Range(min=1, max=LONGEST, error=f"{name} must be a whole number from 1 to n, the tokens"),
        metadata={"description": f"{what} per tile, 1 to n (the last block may be shorter)"},
    )


class TiledRequestSchema(AttentionRequestSchema):
    class Meta:
        exclude = ("include", "positions")  # the answer is the tiles' running values and each head's output; no cache

    block_q = _block("block_q", "query rows")
    block_k = _block("block_k", "keys")
    failure_mode = SafeString(
        allow_none=True,
        validate=validate.OneOf(sorted(SLIPS)),
        metadata={
            "description": "compute the online softmax as this broken implementation would, and say where it "
            "first differs from the right one"
        },
    )


class TileSchema(Schema):
    query_block = fields.Integer(metadata={"description": "0-based"})
    key_block = fields.Integer(metadata={"description": "0-based"})
    rows = fields.List(fields.Integer(), metadata={"description": "[start, end) of its query positions"})
    keys = fields.List(fields.Integer(), metadata={"description": "[start, end) of its key positions"})
    status = fields.String(
        metadata={
            "description": "computed; masked (some of its keys hidden from some of its rows: the mask "
            "applied inside the tile); skipped (every key hidden from every row: never computed)"
        }
    )
    m_before = fields.List(
        fields.Float(allow_none=True),
        allow_none=True,
        metadata={"description": "the maximum each row carried into the tile (what a slip really carried)"},
    )
    m = fields.List(
        fields.Float(allow_none=True),
        allow_none=True,
        metadata={"description": "each row's running maximum after the tile; null where the row has seen no key"},
    )
    alpha = fields.List(
        fields.Float(),
        allow_none=True,
        metadata={"description": "exp(m_previous - m_new): what l and O~ were scaled by"},
    )
    l = fields.List(fields.Float(), allow_none=True, metadata={"description": "each row's running sum of exp(s - m)"})  # noqa: E741
    o_tilde = fields.List(
        fields.List(fields.Float()), allow_none=True, metadata={"description": "the rows' unnormalised output O~"}
    )


class SinkJoinedSchema(Schema):
    m = fields.List(fields.Float(), metadata={"description": "max(m, z) for every row"})
    alpha = fields.List(fields.Float(), metadata={"description": "exp(m - max(m, z))"})
    l = fields.List(fields.Float(), metadata={"description": "alpha l + exp(z - max(m, z))"})  # noqa: E741
    share = fields.List(
        fields.Float(), metadata={"description": "the sink's share of each row, exp(z) / l' = sigmoid(z - lse)"}
    )


class TiledHeadSchema(Schema):
    index = fields.Integer()
    tiles = fields.List(fields.Nested(TileSchema), metadata={"description": "in the order computed"})
    output = Grid
    lse = fields.List(
        fields.Float(allow_none=True),
        metadata={"description": "L = m + log l per row (the log-sum-exp of its visible scores); null where none"},
    )
    sink = fields.Nested(SinkJoinedSchema, metadata={"description": "under a sink logit: once it joined l"})


class TileCountsSchema(Schema):
    computed = fields.Integer(metadata={"description": "tiles computed per head, the masked ones included"})
    masked = fields.Integer()
    skipped = fields.Integer()


class TiledMemorySchema(Schema):
    tiled = fields.Integer(metadata={"description": "numbers held at once per head: a tile's scores, its rows' m, l"})
    plain = fields.Integer(metadata={"description": "the n x n weights the plain pass holds per head"})


class FirstDifferenceSchema(Schema):
    head = fields.Integer()
    tile = fields.Integer(allow_none=True, metadata={"description": "index in the order computed; null: after them"})
    query_block = fields.Integer(allow_none=True)
    key_block = fields.Integer(allow_none=True)
    stage = fields.String(metadata={"description": "status, m, l or o_tilde at a tile; output or lse after them"})


class TiledResponseSchema(Schema):
    block_q = fields.Integer()
    block_k = fields.Integer()
    failure_mode = fields.Dict(keys=fields.String(), values=fields.String(), allow_none=True)
    heads = fields.List(fields.Nested(TiledHeadSchema))
    tiles = fields.Nested(TileCountsSchema)
    memory = fields.Nested(TiledMemorySchema)
    max_difference_from_plain = fields.Float(
        metadata={
            "description": "the largest difference between the tiled outputs and the plain pass's head "
            "outputs, the same request: 0 up to float64 rounding unless a failure mode breaks it"
        }
    )
    first_difference = fields.Nested(
        FirstDifferenceSchema,
        allow_none=True,
        metadata={"description": "with a failure mode: where it first parts from the right online softmax"},
    )
