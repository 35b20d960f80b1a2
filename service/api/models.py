"""Trained models: `GET /models` (what each head does, measured) and
`POST /models/{id}/attention` (every layer's trace on a text, and the next-byte predictions)."""

from __future__ import annotations

from typing import Any

import numpy as np
from flask import current_app
from flask.views import MethodView

from ..compute.model import ABLATION_SEQUENCES, PATTERNS, Model, byte_text, load_models
from ..edge import EdgeRequest, costs
from ..edge.problems import Problem
from .schemas.models import ModelAttentionRequestSchema, ModelListSchema, ModelTraceSchema
from .smorest import JSON_BODY_ERRORS, Blueprint
from .traces import respond, rounded, trace_json

blp = Blueprint(
    "models",
    __name__,
    url_prefix="/api/v1/models",
    description="A small model trained here; each layer is the workbench's multi-head attention with learned weights.",
)


def registry() -> dict[str, Model]:
    return current_app.extensions["models"]


def find(model_id: str) -> Model:
    model = registry().get(model_id)
    if model is None:
        known = ", ".join(sorted(registry())) or "none"
        raise Problem(404, f"no model {model_id!r} here (known: {known})", slug="unknown-model")
    return model


def head_jobs(model: Model, layer: int) -> list[dict[str, Any]]:
    jobs = []
    for h, scores in enumerate(model.scores[layer]):
        named = dict(zip(PATTERNS, map(float, scores), strict=True))
        jobs.append({"index": h, "label": model.labels[layer][h], "pattern_scores": named})
    return jobs


def describe(model: Model) -> dict[str, Any]:
    arch = model.card["architecture"]
    return {
        "id": model.id,
        "description": model.card["description"],
        "layers": model.layers,
        "heads": model.heads,
        "d_model": arch["d_model"],
        "context": model.context,
        "licence": model.card["licences"],
        "measured_on": model.card["head_scores"]["measured_on"],
        "layer_heads": [head_jobs(model, layer) for layer in range(model.layers)],
    }


def ablated_heads(model: Model, ablate: list[dict[str, int]]) -> frozenset[tuple[int, int]]:
    """The `ablate` list as (layer, head) pairs, or a 422 naming the first that is not in the model."""
    for i, ref in enumerate(ablate):
        if ref["layer"] >= model.layers or ref["head"] >= model.heads:
            message = (
                f"layer {ref['layer']}, head {ref['head']} is not in {model.id}: it has layers 0 to "
                f"{model.layers - 1} and heads 0 to {model.heads - 1} (0-based)"
            )
            raise Problem(422, message, errors={f"ablate.{i}": [message]})
    return frozenset((ref["layer"], ref["head"]) for ref in ablate)


def trace_body(model: Model, data: bytes, args: dict[str, Any]) -> dict[str, Any]:
    off = ablated_heads(model, args.get("ablate") or [])
    forward = model.forward(np.frombuffer(data, dtype=np.uint8), off)
    include, precision = set(args.get("include") or ()), args.get("precision")
    intact, ablated = model.ablation_scores(off) if off else (model.scores, model.scores)
    layers = []
    for index, trace in enumerate(forward.layers):
        body = trace_json(trace, include, precision)
        for head, job in zip(body["heads"], head_jobs(model, index), strict=True):
            head.update(label=job["label"], pattern_scores=job["pattern_scores"], off=(index, head["index"]) in off)
            if off:
                head["ablation"] = {
                    "intact": dict(zip(PATTERNS, map(float, intact[index, head["index"]]), strict=True)),
                    "ablated": dict(zip(PATTERNS, map(float, ablated[index, head["index"]]), strict=True)),
                }
        if "residual" in body:  # the model's stream + output (the engine's own input was LN(stream))
            body["residual"] = rounded(forward.streams[index], precision)
        layers.append({"index": index, **body})
    after = [likeliest(row, position + 1, args["top"]) for position, row in enumerate(forward.probabilities)]
    extra = {}
    if off:
        extra = {
            "ablated": [{"layer": layer, "head": head} for layer, head in sorted(off)],
            "ablation_measured_on": f"the first {ABLATION_SEQUENCES} of the held-out sequences in measured_on",
        }
    return {
        "model": model.id,
        **extra,
        "tokens": [{"index": i, "byte": int(b), "text": byte_text(int(b))} for i, b in enumerate(data)],
        "shape": layers[0]["shape"],
        "layers": layers,
        "next": after[-1],
        "after": after,
    }


def likeliest(probabilities: np.ndarray, index: int, top: int) -> list[dict[str, Any]]:
    """probabilities [256] -> the `top` likeliest bytes at position `index`, likeliest first."""
    best = np.argsort(-probabilities, kind="stable")[:top]
    return [
        {"index": index, "byte": int(b), "text": byte_text(int(b)), "probability": float(probabilities[b])}
        for b in best
    ]


@blp.route("")
class Models(MethodView):
    @blp.response(200, ModelListSchema)
    def get(self):
        """Every trained model, with what each of its heads does (scores measured at start-up)"""
        return {"models": [describe(model) for model in registry().values()]}


def cells(req: EdgeRequest) -> int | None:
    """A model's trace costs every layer's attention on the text (charged at the edge)."""
    model = registry().get(req.view_args.get("model_id", ""))
    text = req.data.get("text") if isinstance(req.data, dict) else None
    if model is None or not isinstance(text, str):
        return None  # the view says what is wrong
    n = min(len(text.encode("utf-8", "surrogatepass")), model.context)
    one = model.layers * (model.heads * n * n + n * model.card["architecture"]["d_model"])
    if req.data.get("ablate"):  # the scores are measured again: sequences of up to `context` bytes
        c = model.context
        one += ABLATION_SEQUENCES * model.layers * (model.heads * c * c + c * model.card["architecture"]["d_model"])
    return one


@blp.route("/<string:model_id>/attention")
class ModelAttention(MethodView):
    @costs(cells)
    @blp.arguments(
        ModelAttentionRequestSchema(),
        examples={
            "a text": {"value": {"text": "def f(x):", "top": 5}},
            "a head switched off": {"value": {"text": "x7Kp2Qx7Kp2Q", "ablate": [{"layer": 0, "head": 0}]}},
        },
    )
    @blp.response(200, ModelTraceSchema)
    @blp.problems(404, *JSON_BODY_ERRORS)
    def post(self, args, model_id):
        """Run a text through the model: every layer's trace with each head's label, and the likeliest next bytes"""
        model = find(model_id)
        data = args["text"].encode("utf-8")
        if len(data) > model.context:
            raise Problem(
                413,
                f"the text is {len(data)} bytes in UTF-8; {model.id} reads at most {model.context}",
                title="Content Too Large",
                errors={"text": [f"{len(data)} bytes exceeds the context of {model.context}"]},
                slug="over-limit",
                extra={"limits": {"context": model.context}},
            )
        return respond(trace_body(model, data, args))


def init_app(app) -> None:
    app.extensions["models"] = load_models(app.extensions["settings"].models_dir)
