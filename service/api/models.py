"""Trained models: `GET /models` (what each head does, measured) and
`POST /models/{id}/attention` (every layer's trace on a text, and the next-byte predictions)."""

from __future__ import annotations

from typing import Any

import numpy as np
from flask import current_app
from flask.views import MethodView

from ..compute.model import PATTERNS, Model, byte_text, load_models
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


def trace_body(model: Model, data: bytes, args: dict[str, Any]) -> dict[str, Any]:
    forward = model.forward(np.frombuffer(data, dtype=np.uint8))
    include, precision = set(args.get("include") or ()), args.get("precision")
    layers = []
    for index, trace in enumerate(forward.layers):
        body = trace_json(trace, include, precision)
        for head, job in zip(body["heads"], head_jobs(model, index), strict=True):
            head.update(label=job["label"], pattern_scores=job["pattern_scores"])
        if "residual" in body:  # the model's stream + output (the engine's own input was LN(stream))
            body["residual"] = rounded(forward.streams[index], precision)
        layers.append({"index": index, **body})
    after = [likeliest(row, position + 1, args["top"]) for position, row in enumerate(forward.probabilities)]
    return {
        "model": model.id,
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
    return model.layers * (model.heads * n * n + n * model.card["architecture"]["d_model"])


@blp.route("/<string:model_id>/attention")
class ModelAttention(MethodView):
    @costs(cells)
    @blp.arguments(ModelAttentionRequestSchema(), example={"text": "def f(x):", "top": 5})
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
