"""Compute: `POST /attention` (every intermediate) and `POST /attention/compare` (correct vs broken).

JSON by default; `Accept: application/octet-stream` (optionally `; dtype=float32`) answers with
the same numbers in the safetensors layout (safetensors_codec.body_tensors). Each request's cells are
charged at the edge (`cells`); a body the fast loader is sure of is answered there too
(`fast`), the rest by the views below, which marshmallow validates and words.
"""

from __future__ import annotations

from typing import Any

from flask import current_app, request, send_file
from flask.views import MethodView

from ...edge import JSON, Answer, EdgeRequest, answer_fast, costs
from ..schemas.attention import (
    AttentionRequestSchema,
    AttentionResponseSchema,
    CompareRequestSchema,
    CompareResponseSchema,
    DecodeRequestSchema,
    DecodeResponseSchema,
)
from ..schemas.fields import Doubt, loader
from ..schemas.tiled import TiledRequestSchema, TiledResponseSchema
from ..smorest import JSON_BODY_ERRORS, Blueprint
from . import offload as heavy
from .caps import cost, refuse_over_caps, refuse_over_decode_cap, refuse_over_tiled_caps
from .shortcut import note
from .traces import BINARY, compare_body, decode_body, encode, respond, tiled_body, trace_body, wants_binary

blp = Blueprint(
    "attention",
    __name__,
    url_prefix="/api/v1/attention",
    description="Multi-head attention with every per-head intermediate.",
)

# The request example the docs page offers ("Try it out"): the workbench's three tokens, two heads.
EXAMPLE = {"tokens": [[1, 0, 1, 0], [0, 1, 0, 1], [1, 1, 0, 0]], "heads": 2, "causal": True}
# Latent attention on the same tokens: a 2-wide latent per token (what its cache keeps), two heads.
LATENT_EXAMPLE = {
    **EXAMPLE,
    "latent": {
        "down": [[1, 0], [0, 1], [1, 0], [0, 1]],
        "up_key": [[1, 0, 0.5, 0], [0, 1, 0, 0.5]],
        "up_value": [[1, 0, 0, 1], [0, 1, 1, 0]],
        "absorbed": True,
    },
}
DECODE_EXAMPLES = {
    "grouped-query attention, a position a step": {"value": {**EXAMPLE, "kv_heads": 1, "prefill": 1}},
    "the mask aligned top-left (a failure mode)": {"value": {**EXAMPLE, "failure_mode": "decode_mask_top_left"}},
    "latent attention": {"value": LATENT_EXAMPLE},
}
BINARY_RESPONSE = {
    "content": {
        BINARY: {
            "schema": {
                "type": "string",
                "format": "binary",
                "description": "The same numbers in the safetensors layout: a tensor per array, named by its path in "
                "the JSON (`heads.0.weights`, `concat`); other fields as JSON strings in `__metadata__`; a boolean "
                "`mask` where the JSON has null. Ask with `Accept: application/octet-stream` (`; dtype=float32` for "
                "float32).",
            }
        }
    }
}
LOAD = {False: loader(AttentionRequestSchema), True: loader(CompareRequestSchema)}


def cells(compare: bool):
    """What a request charges: a parsed body's cells (over a cap: 413 first), a body too large to
    parse in a request thread measured in the background process (heavy.measure_large_body)."""

    def measure(req: EdgeRequest) -> int | None:
        if not req.parsed:
            return heavy.measure_large_body(req.raw or b"", compare)
        data = req.data
        refuse_over_caps(data, req.app.extensions["settings"])
        try:
            tokens, heads = data["tokens"], data["heads"]
            return cost(tokens, heads, compare) if type(heads) is int and tokens and type(tokens[0]) is list else None
        except (KeyError, TypeError, IndexError):
            return None  # not an attention body: the view's schema says what is wrong

    return measure


def fast(compare: bool):
    """The whole answer for a body the schema's fast loader is sure of; None: the view answers."""

    def handle(req: EdgeRequest) -> Answer | None:
        binary = wants_binary(req.accept)
        if not req.parsed:  # large: parsed, validated and computed in the background process
            return _file(heavy.run(None, compare=compare, binary=binary, raw=req.raw), binary)
        try:
            args = LOAD[compare](req.data)
        except Doubt:
            return None
        failure_mode = None if compare else args.get("failure_mode")
        if is_heavy(cost(args["tokens"], args["heads"], compare)):
            return _file(heavy.run(args, failure_mode, compare=compare, binary=binary), binary)
        note(args)
        body = compare_body(args) if compare else trace_body(args, failure_mode)
        return Answer(200, encode(body, binary), BINARY if binary else "application/json")

    return handle


def _file(handle: Any, binary: str | None) -> Answer:
    return Answer(200, handle, BINARY if binary else "application/json")


def is_heavy(cells: int) -> bool:
    """Requests that cost this much run in the background process, never in a request thread."""
    return cells >= current_app.extensions["settings"].heavy_compute_cells


def answer(args: dict[str, Any], compare: bool) -> Any:
    """The view's answer (its cells were charged at the edge): here, or in the background process."""
    binary = wants_binary(request.accept_mimetypes)
    failure_mode = None if compare else args.get("failure_mode")
    if is_heavy(cost(args["tokens"], args["heads"], compare)):
        handle = heavy.run(args, failure_mode, compare=compare, binary=binary)
        return send_file(
            handle, mimetype=BINARY if binary else "application/json", max_age=0, conditional=False, etag=False
        )
    note(args)
    return respond(compare_body(args) if compare else trace_body(args, failure_mode))


@blp.route("")
class Attention(MethodView):
    @costs(cells(False))
    @answer_fast(fast(False))
    @blp.arguments(
        AttentionRequestSchema(),
        examples={"the workbench's tokens": {"value": EXAMPLE}, "latent attention": {"value": LATENT_EXAMPLE}},
    )
    @blp.response(200, AttentionResponseSchema)
    @blp.doc(responses={200: BINARY_RESPONSE})
    @blp.problems(503, *JSON_BODY_ERRORS)
    def post(self, args):
        """Compute multi-head attention and return every per-head intermediate"""
        return answer(args, False)


@blp.route("/compare")
class Compare(MethodView):
    @costs(cells(True))
    @answer_fast(fast(True))
    @blp.arguments(CompareRequestSchema(), example={**EXAMPLE, "failure_mode": "reuse_first_slice"})
    @blp.response(200, CompareResponseSchema)
    @blp.doc(responses={200: BINARY_RESPONSE})
    @blp.problems(503, *JSON_BODY_ERRORS)
    def post(self, args):
        """Compute the correct and a broken implementation side by side, with per-cell differences"""
        return answer(args, True)


def decode_cost(req: EdgeRequest) -> int | None:
    """A decode charges its answer's numbers (413 over max_decode_cells) and the full pass it is held to.
    Its view parses the body in this thread whatever its size, so it is measured whole, and its caps read,
    here, once, before any element is validated."""
    data = req.parse()
    return decode_cells(data, req.app.extensions["settings"]) if isinstance(data, dict) else None


def decode_cells(data: dict[str, Any], settings: Any) -> int | None:
    refuse_over_caps(data, settings)
    cells = refuse_over_decode_cap(data, settings)
    measured = cells_of(data)
    return None if cells is None or measured is None else cells + measured


def cells_of(data: dict[str, Any]) -> int | None:
    tokens, heads = data.get("tokens"), data.get("heads")
    if type(heads) is int and isinstance(tokens, list) and tokens and type(tokens[0]) is list and tokens[0]:
        return cost(tokens, heads)
    return None


@blp.route("/decode")
class Decode(MethodView):
    @costs(decode_cost)
    @blp.arguments(DecodeRequestSchema(), examples=DECODE_EXAMPLES)
    @blp.response(200, DecodeResponseSchema)
    @blp.problems(*JSON_BODY_ERRORS)
    def post(self, args):
        """Generate position by position with a KV cache: each step's new query row, the cache after it, and the
        largest difference from recomputing the full causal pass"""
        return answered(args, "decode", decode_cells)


def tiled_cost(req: EdgeRequest) -> int | None:
    """An online softmax charges its answer's numbers (413 over max_tiles or max_tiled_cells) and the
    plain pass it runs over (twice with a failure mode: the right tiles too), measured whole as a decode is."""
    data = req.parse()
    return tiled_cells(data, req.app.extensions["settings"]) if isinstance(data, dict) else None


def tiled_cells(data: dict[str, Any], settings: Any) -> int | None:
    refuse_over_caps(data, settings)
    size = refuse_over_tiled_caps(data, settings)
    measured = cells_of(data)
    if size is None or measured is None:
        return None
    return (size[1] + measured) * (2 if data.get("failure_mode") else 1)


def answered(args: dict[str, Any], kind: str, cells_for: Any) -> Any:
    """A decode's or a tiled pass's answer (`kind`): in the background process, at idle priority, when what it
    was charged is heavy, as a large trace is; else here."""
    cells = cells_for(request.environ.get(JSON) or {}, current_app.extensions["settings"])
    binary = wants_binary(request.accept_mimetypes) if kind == "decode" else None  # a decode's tensors, too
    if cells is not None and is_heavy(cells):
        handle = heavy.run(args, binary=binary, body_of=kind)
        mimetype = BINARY if binary else "application/json"
        return send_file(handle, mimetype=mimetype, max_age=0, conditional=False, etag=False)
    body = decode_body(args) if kind == "decode" else tiled_body(args)
    return current_app.response_class(encode(body, binary), mimetype=BINARY if binary else "application/json")


@blp.route("/tiled")
class Tiled(MethodView):
    @costs(tiled_cost)
    @blp.arguments(TiledRequestSchema(), example={**EXAMPLE, "block_q": 2, "block_k": 2})
    @blp.response(200, TiledResponseSchema)
    @blp.problems(*JSON_BODY_ERRORS)
    def post(self, args):
        """Compute the softmax online, tile by tile (FlashAttention-2's loop): every tile's running maximum,
        rescale factor, running sum and unnormalised output, the output and log-sum-exp, and the largest
        difference from the plain pass"""
        note(args)  # an online-softmax challenge's case, computed here, is seen as the plain pass's would be
        return answered(args, "tiled", tiled_cells)
