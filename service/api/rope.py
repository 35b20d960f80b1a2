"""RoPE's frequencies for a model configuration: `GET /rope/presets` (released models' RoPE, each with
its source) and `POST /rope/frequencies` (every pair's frequency before and after the scaling, its
wavelength, what happened to it, and the attention factor: service/compute/rope.py)."""

from __future__ import annotations

from flask.views import MethodView

from ..compute.failure_modes import recipe_of
from ..compute.rope import RopeConfig, pairs_table
from ..compute.scaling import Scaling
from .attention.traces import engine_errors
from .schemas.rope import ROPE_MODELS, FrequenciesRequestSchema, FrequenciesResponseSchema, RopeModelListSchema
from .smorest import JSON_BODY_ERRORS, Blueprint

blp = Blueprint(
    "rope",
    __name__,
    url_prefix="/api/v1/rope",
    description="RoPE's frequencies past the training length: linear, NTK, YaRN, Llama 3 and LongRoPE scaling.",
)


@blp.route("/presets")
class Presets(MethodView):
    @blp.response(200, RopeModelListSchema)
    def get(self):
        """Released models' RoPE as their published configurations state it, each with its source"""
        return {"presets": list(ROPE_MODELS.values())}


@blp.route("/frequencies")
class Frequencies(MethodView):
    @blp.arguments(
        FrequenciesRequestSchema(),
        examples={
            "Llama 3.1 8B": {"value": {"preset": "llama-3.1-8b"}},
            "YaRN, the paper's ramp": {
                "value": {
                    "head_dim": 128,
                    "base": 10000.0,
                    "scaling": {"rope_type": "yarn", "factor": 16, "original_max_position_embeddings": 4096},
                }
            },
        },
    )
    @blp.response(200, FrequenciesResponseSchema)
    @blp.problems(*JSON_BODY_ERRORS)
    def post(self, args):
        """Every pair's frequency before and after a scaling, its wavelength, what happened, the attention factor"""
        model = ROPE_MODELS.get(args.get("preset", ""), {})
        width = args.get("head_dim", model.get("head_dim", 128))
        given = args.get("scaling", model.get("scaling"))
        if args.get("scaling") and model:  # a preset's scaling with the fields given in their place
            given = {**model["scaling"], **args["scaling"]}
        with engine_errors():
            rope = RopeConfig(base=args.get("base", model.get("base", 10000.0)), scaling=Scaling.coerce(given))
            rope.check(width)
        scaling = rope.scaling
        length = args.get("length") or model.get("context") or (scaling and scaling.original) or 1
        table = pairs_table(rope, width, length, recipe_of(args.get("failure_mode")).scaling)
        return {
            **table,
            "preset": model.get("id"),
            "source": model.get("source"),
            "model_base": rope.base,
            "scaling": None if scaling is None else scaling.given(),
            "failure_mode": args.get("failure_mode"),
            "ntk_aware_base": None
            if scaling is None or width == 2
            else rope.base * scaling.factor ** (width / (width - 2)),
        }
