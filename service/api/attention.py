"""Compute: `POST /attention` (every intermediate) and `POST /attention/compare` (correct vs broken).

JSON by default; `Accept: application/octet-stream` (optionally `; dtype=float32`) answers with
the same numbers in the safetensors layout (traces.body_tensors)."""

from __future__ import annotations

from typing import Any

from flask import current_app, request
from flask.views import MethodView

from . import heavy
from .schemas.attention import (
    AttentionRequestSchema,
    AttentionResponseSchema,
    CompareRequestSchema,
    CompareResponseSchema,
)
from .smorest import JSON_BODY_ERRORS, Blueprint
from .traces import BINARY, compare_body, encode, trace_body, wants_binary

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


def respond(body: dict) -> Any:
    binary = wants_binary(request.accept_mimetypes)
    return current_app.response_class(encode(body, binary), mimetype=BINARY if binary else "application/json")


def cost(args: dict[str, Any], compare: bool = False) -> int:
    """What a request costs, in cells: the score tensor (heads x n x n) plus the activations
    (n x d_model), which dominate when d_model is large and n is not; a comparison is two traces."""
    tokens = args["tokens"]
    n, d_model = len(tokens), len(tokens[0])
    return (args["heads"] * n * n + n * d_model) * (2 if compare else 1)


def is_heavy(args: dict[str, Any], compare: bool = False) -> bool:
    """Requests that cost this much run in the background process, never in a request thread."""
    return cost(args, compare) >= current_app.extensions["settings"].heavy_compute_cells


@blp.route("")
class Attention(MethodView):
    @blp.arguments(AttentionRequestSchema())
    @blp.response(200, AttentionResponseSchema)
    @blp.doc(responses={200: BINARY_RESPONSE})
    @blp.problems(503, *JSON_BODY_ERRORS)
    def post(self, args):
        """Compute multi-head attention and return every per-head intermediate"""
        if is_heavy(args):
            return heavy.run(args, args.get("failure_mode"), binary=wants_binary(request.accept_mimetypes))
        return respond(trace_body(args, args.get("failure_mode")))


@blp.route("/compare")
class Compare(MethodView):
    @blp.arguments(CompareRequestSchema())
    @blp.response(200, CompareResponseSchema)
    @blp.doc(responses={200: BINARY_RESPONSE})
    @blp.problems(503, *JSON_BODY_ERRORS)
    def post(self, args):
        """Compute the correct and a broken implementation side by side, with per-cell differences"""
        if is_heavy(args, compare=True):
            return heavy.run(args, compare=True, binary=wants_binary(request.accept_mimetypes))
        return respond(compare_body(args))
