"""Compute: `POST /attention` (every intermediate) and `POST /attention/compare` (correct vs broken)."""

from __future__ import annotations

from typing import Any

import numpy as np
from flask import current_app
from flask.views import MethodView

from ..compute import AttentionInputError, AttentionTrace, multi_head_attention
from ..compute.config import FAILURE_MODES
from . import heavy
from .core import JSON_BODY_ERRORS, Blueprint
from .jsonio import dumps_bytes
from .problems import Problem
from .schemas import AttentionRequestSchema, AttentionResponseSchema, CompareRequestSchema, CompareResponseSchema
from .serialize import trace_json

blp = Blueprint(
    "attention",
    __name__,
    url_prefix="/api/v1/attention",
    description="Multi-head attention with every per-head intermediate.",
)


def compute(args: dict[str, Any], failure_mode: str | None) -> AttentionTrace:
    projections = args.get("projections") or {}
    rope = args.get("rope")
    try:
        return multi_head_attention(
            args["tokens"],
            args["heads"],
            causal=args.get("causal", True),
            w_q=projections.get("query"),
            w_k=projections.get("key"),
            w_v=projections.get("value"),
            w_o=projections.get("output"),
            kv_heads=args.get("kv_heads"),
            rope=None if rope is None else {"style": rope["style"], "base": rope.get("base", 10000.0)},
            failure_mode=failure_mode,
        )
    except AttentionInputError as exc:
        field = exc.field or "tokens"
        raise Problem(422, str(exc), errors={field: [str(exc)]}, slug="invalid-attention-input") from None


def json_response(body: dict) -> Any:
    return current_app.response_class(dumps_bytes(body), mimetype="application/json")


def trace_body(args: dict[str, Any], failure_mode: str | None) -> dict:
    trace = compute(args, failure_mode)
    return trace_json(trace, set(args.get("include") or ()), args.get("precision"))


def compare_body(args: dict[str, Any]) -> dict:
    mode = args["failure_mode"]
    correct = compute(args, None)
    broken = compute(args, mode)
    include = set(args.get("include") or ())
    precision = args.get("precision")
    diffs = {
        "weights": broken.weights - correct.weights,
        "head_outputs": broken.head_outputs - correct.head_outputs,
        "concat": broken.concat - correct.concat,
        "output": broken.output - correct.output,
        "residual": broken.residual - correct.residual,
    }
    max_abs = {name: float(np.abs(d).max()) for name, d in diffs.items()}
    if precision is not None:
        diffs = {name: np.round(d, precision) + 0.0 for name, d in diffs.items()}
    return {
        "failure_mode": {"id": mode, "description": FAILURE_MODES[mode]},
        "correct": trace_json(correct, include, precision),
        "broken": trace_json(broken, include, precision),
        "differences": {**diffs, "max_abs": max_abs},
    }


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
