"""Compute: `POST /attention` (every intermediate) and `POST /attention/compare` (correct vs broken)."""

from __future__ import annotations

from typing import Any

from flask import current_app
from flask.views import MethodView

from . import heavy
from .json_codec import dumps_bytes
from .schemas.attention import (
    AttentionRequestSchema,
    AttentionResponseSchema,
    CompareRequestSchema,
    CompareResponseSchema,
)
from .smorest import JSON_BODY_ERRORS, Blueprint
from .traces import compare_body, trace_body

blp = Blueprint(
    "attention",
    __name__,
    url_prefix="/api/v1/attention",
    description="Multi-head attention with every per-head intermediate.",
)


def json_response(body: dict) -> Any:
    return current_app.response_class(dumps_bytes(body), mimetype="application/json")


def is_heavy(args: dict[str, Any]) -> bool:
    n = len(args["tokens"])
    return args["heads"] * n * n >= current_app.extensions["settings"].heavy_compute_cells


@blp.route("")
class Attention(MethodView):
    @blp.arguments(AttentionRequestSchema())
    @blp.response(200, AttentionResponseSchema)
    @blp.problems(503, *JSON_BODY_ERRORS)
    def post(self, args):
        """Compute multi-head attention and return every per-head intermediate"""
        if is_heavy(args):
            return heavy.run(args, args.get("failure_mode"))
        return json_response(trace_body(args, args.get("failure_mode")))


@blp.route("/compare")
class Compare(MethodView):
    @blp.arguments(CompareRequestSchema())
    @blp.response(200, CompareResponseSchema)
    @blp.problems(503, *JSON_BODY_ERRORS)
    def post(self, args):
        """Compute the correct and a broken implementation side by side, with per-cell differences"""
        if is_heavy(args):
            return heavy.run(args, compare=True)
        return json_response(compare_body(args))
