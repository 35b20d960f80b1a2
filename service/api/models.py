"""Trained models: `GET /models` (what each head does, measured), `POST /models/{id}/attention` (every
layer's trace on a text, and the next-byte predictions), `POST /models/{id}/lens` (the logit lens of every
stream and head), `POST /models/{id}/patch` (activation and attribution patching) and `POST
/models/{id}/speculate` (speculative decoding, the lens or the bigram table as the draft). What they answer is
built in the models' own room (service/models/present.py, present_inside.py)."""

from __future__ import annotations

from typing import Any

from flask import current_app
from flask.views import MethodView

from ..edge import EdgeRequest, costs
from ..edge.problems import Problem
from ..models import AnyModel, ablations, load, served
from ..models.present import ModelRequestError, describe, run
from ..models.present_inside import PATCH_BYTES
from ..text import N_
from .attention import offload as heavy
from .attention.traces import respond
from .schemas.models import (
    LensRequestSchema,
    LensSchema,
    ModelAttentionRequestSchema,
    ModelListSchema,
    ModelTraceSchema,
    PatchRequestSchema,
    PatchSchema,
)
from .schemas.speculative import SpeculateRequestSchema, SpeculateSchema
from .smorest import JSON_BODY_ERRORS, Blueprint

blp = Blueprint(
    "models",
    __name__,
    url_prefix="/api/v1/models",
    description="A small model trained here and, with the minilm extra, a pretrained encoder; each layer's "
    "attention is the workbench's multi-head attention with the model's weights.",
)


def registry() -> dict[str, AnyModel]:
    return current_app.extensions["models"]


def find(model_id: str) -> AnyModel:
    model = registry().get(model_id)
    if model is None:
        known = ", ".join(sorted(registry())) or "none"
        args = {"model": repr(model_id), "known": known}
        raise Problem(404, N_("no model %(model)s here (known: %(known)s)"), args=args, slug="unknown-model")
    return model


def _answer(kind: str, model_id: str, args: dict[str, Any]) -> Any:
    """A model's answer: in the background process at idle priority when what it costs is heavy (the process
    loads the model once), else here with the worker's own."""
    model = find(model_id)
    if not heavy.charged_heavy():
        return served.ANSWERS[kind](model, args)
    settings = current_app.extensions["settings"]
    return heavy.in_background(served.answer, kind, settings.models_dir, settings.encoders_dir, model_id, args)


@blp.route("")
class Models(MethodView):
    @blp.response(200, ModelListSchema)
    def get(self):
        """Every trained model, with what each of its heads does (scores measured at start-up)"""
        return {"models": [describe(model) for model in registry().values()]}, 200, {"Vary": "Accept-Language, Cookie"}


def cells(req: EdgeRequest) -> int | None:
    """A model's trace costs every layer's attention on the text (charged at the edge), and, with
    heads switched off, measuring their scores again, unless that is measured already (each head
    alone at build time, any other set once per worker): switching heads off and on is then free."""
    model = registry().get(req.view_args.get("model_id", ""))
    if model is not None and not req.parsed:  # a body too large to parse here: the model's longest text
        return model.cells("x" * model.context) + model.ablation_cells
    text = req.data.get("text") if isinstance(req.data, dict) else None
    if model is None or not isinstance(text, str):
        return None  # the view says what is wrong
    off = _heads_off(req.data.get("ablate"))
    measured = off is not None and (not off or ablations.known(model, off))
    return model.cells(text) + (0 if measured else model.ablation_cells)


def _heads_off(ablate: Any) -> frozenset[tuple[int, int]] | None:
    """The `ablate` list as (layer, head) pairs; None when it is not one (the view says why)."""
    if ablate is None:
        return frozenset()
    refs = ablate if isinstance(ablate, list) else None
    if refs is None or not all(
        isinstance(r, dict) and type(r.get("layer")) is int and type(r.get("head")) is int for r in refs
    ):
        return None
    return frozenset((r["layer"], r["head"]) for r in refs)


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
        """Run a text through a model: every layer's trace with each head's label (and the byte model's next bytes)"""
        try:
            return respond(run(find(model_id), args))  # here: the head scores it measures are this worker's to keep
        except ModelRequestError as refused:
            raise problem(refused) from None


def lens_cells(req: EdgeRequest) -> int | None:
    """A lens costs a trace and reading every stream and head through the unembedding."""
    model = registry().get(req.view_args.get("model_id", ""))
    text = req.data.get("text") if req.parsed and isinstance(req.data, dict) else None
    if model is None or not isinstance(text, str):
        return None if model is None or req.parsed else model.cells("x" * model.context) * 2
    return model.cells(text) * 2


def patch_cells(req: EdgeRequest) -> int | None:
    """A patch grid costs a run of the model for every cell ((L + 1) n of the stream, L H n of the heads),
    and the gradient one more."""
    model = registry().get(req.view_args.get("model_id", ""))
    data = req.data if req.parsed and isinstance(req.data, dict) else {}
    text = data.get("clean")
    if model is None:
        return None
    n = min(len(text.encode("utf-8", "surrogatepass")), PATCH_BYTES) if isinstance(text, str) else PATCH_BYTES
    grid = (model.layers + 1) * n if data.get("component") == "residual" else model.layers * model.heads * n
    return (grid + 3) * model.cells("x" * n)


@blp.route("/<string:model_id>/lens")
class Lens(MethodView):
    @costs(lens_cells)
    @blp.arguments(LensRequestSchema(), examples={"an induction text": {"value": {"text": "x7Kp2Qx7Kp2Q", "top": 3}}})
    @blp.response(200, LensSchema)
    @blp.problems(404, *JSON_BODY_ERRORS)
    def post(self, args, model_id):
        """The logit lens: every stream, and each head's write, read through the final norm and W_U"""
        try:
            return respond(_answer("lens", model_id, args))
        except ModelRequestError as refused:
            raise problem(refused) from None


@blp.route("/<string:model_id>/patch")
class Patch(MethodView):
    @costs(patch_cells)
    @blp.arguments(
        PatchRequestSchema(),
        examples={
            "which head copies the byte": {
                "value": {
                    "clean": "q8Lm3Zq8Lm3Z",
                    "corrupted": "q8Lm3Zq8Lm3Y",
                    "metric": {"kind": "logit_difference", "bytes": [90, 89]},
                    "component": "head_output",
                    "estimate": True,
                }
            }
        },
    )
    @blp.response(200, PatchSchema)
    @blp.problems(404, *JSON_BODY_ERRORS)
    def post(self, args, model_id):
        """Activation patching (and attribution patching's estimates): every cell's effect on the metric"""
        try:
            return respond(_answer("patch", model_id, args))
        except ModelRequestError as refused:
            raise problem(refused) from None


def speculate_cells(req: EdgeRequest) -> int | None:
    """Speculative decoding costs, at most, a target pass and a draft for every byte it emits."""
    model = registry().get(req.view_args.get("model_id", ""))
    return None if model is None else 4 * model.cells("x" * model.context)


@blp.route("/<string:model_id>/speculate")
class Speculate(MethodView):
    @costs(speculate_cells)
    @blp.arguments(
        SpeculateRequestSchema(),
        examples={
            "the lens as the draft": {
                "value": {"prompt": "def f(x):\n    return ", "gamma": 4, "max_new_tokens": 32, "temperature": 1.0}
            }
        },
    )
    @blp.response(200, SpeculateSchema)
    @blp.problems(404, *JSON_BODY_ERRORS)
    def post(self, args, model_id):
        """Speculative decoding: each round's drafts, their verification over the cache, the rollback, the output"""
        try:
            return respond(_answer("speculate", model_id, args))
        except ModelRequestError as refused:
            raise problem(refused) from None


def problem(refused: ModelRequestError) -> Problem:
    over = refused.status == 413
    return Problem(
        refused.status,
        refused.message,
        args=refused.values,
        errors={refused.field: [str(refused)]},
        title="Content Too Large" if over else None,
        slug="over-limit" if over else None,
        extra={"limits": refused.limits} if refused.limits else None,
    )


def init_app(app) -> None:
    app.extensions["models"] = load(app.extensions["settings"])
