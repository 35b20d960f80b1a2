"""Compute: `POST /attention` (every intermediate) and `POST /attention/compare` (correct vs broken).

JSON by default; `Accept: application/octet-stream` (optionally `; dtype=float32`) answers with
the same numbers in the safetensors layout (traces.body_tensors)."""

from __future__ import annotations

from typing import Any

from flask import current_app, request
from flask.views import MethodView

from . import budgets, heavy
from .schemas.attention import (
    AttentionRequestSchema,
    AttentionResponseSchema,
    CompareRequestSchema,
    CompareResponseSchema,
)
from .smorest import JSON_BODY_ERRORS, Blueprint
from .strict_input import read_body_bytes, require_json
from .traces import BINARY, compare_body, respond, trace_body, wants_binary

blp = Blueprint(
    "attention",
    __name__,
    url_prefix="/api/v1/attention",
    description="Multi-head attention with every per-head intermediate.",
)


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


def is_heavy(cells: int) -> bool:
    """Requests that cost this much run in the background process, never in a request thread."""
    return cells >= current_app.extensions["settings"].heavy_compute_cells


def answer(args: dict[str, Any], compare: bool, cells: int) -> Any:
    """Charge the budgets, then compute here (small) or in the background process (large)."""
    budgets.charge(cells)
    failure_mode = None if compare else args.get("failure_mode")
    if is_heavy(cells):
        return heavy.run(args, failure_mode, compare=compare, binary=wants_binary(request.accept_mimetypes))
    return respond(compare_body(args) if compare else trace_body(args, failure_mode))


@blp.before_request
def _large_bodies_are_parsed_in_the_background() -> Any:
    """A body of `background_parse_bytes` or more skips the request thread's parser: parsing
    1.5 MB of JSON holds the worker's GIL for about 30 ms, time every other request of the worker
    (event ingestion above all) would wait. The background process parses and validates it with
    the same schema and answers the same errors (heavy.parse_large_body)."""
    settings = current_app.extensions["settings"]
    if request.method != "POST" or (request.content_length or 0) < settings.background_parse_bytes:
        return None
    require_json()  # 415 before reading a byte of the body
    compare = request.endpoint == "attention.Compare"
    raw = read_body_bytes()
    budgets.charge(heavy.measure_large_body(raw, compare))
    return heavy.run(None, compare=compare, binary=wants_binary(request.accept_mimetypes), raw=raw)


@blp.route("")
class Attention(MethodView):
    @blp.arguments(AttentionRequestSchema())
    @blp.response(200, AttentionResponseSchema)
    @blp.doc(responses={200: BINARY_RESPONSE})
    @blp.problems(503, *JSON_BODY_ERRORS)
    def post(self, args):
        """Compute multi-head attention and return every per-head intermediate"""
        return answer(args, False, budgets.cost(args))


@blp.route("/compare")
class Compare(MethodView):
    @blp.arguments(CompareRequestSchema())
    @blp.response(200, CompareResponseSchema)
    @blp.doc(responses={200: BINARY_RESPONSE})
    @blp.problems(503, *JSON_BODY_ERRORS)
    def post(self, args):
        """Compute the correct and a broken implementation side by side, with per-cell differences"""
        return answer(args, True, budgets.cost(args, compare=True))
