"""The KV cache's memory for a model configuration: `GET /kv-cache/presets` (released models, each
with its source) and `POST /kv-cache` (elements and bytes per token and for the context, beside the
MHA equivalent), as DeepSeek-V2's Table 1 counts them (service/compute/cache_memory.py)."""

from __future__ import annotations

from typing import Any

from flask.views import MethodView

from ..compute.cache_memory import PRESETS, CacheShape, ModelPreset, memory
from .attention.traces import engine_errors
from .schemas.kv_cache import CacheRequestSchema, CacheResponseSchema, ModelConfigListSchema
from .smorest import JSON_BODY_ERRORS, Blueprint

blp = Blueprint(
    "kv_cache",
    __name__,
    url_prefix="/api/v1/kv-cache",
    description="How much memory a KV cache takes: MHA, GQA, MQA and MLA side by side, for released models or "
    "any configuration.",
)


def preset_json(preset: ModelPreset) -> dict[str, Any]:
    s = preset.shape
    request: dict[str, Any] = {
        "layers": s.layers,
        "heads": s.heads,
        "d_head": s.d_head,
        "tokens": preset.context,
        "bytes_per_element": preset.bytes_per_element,
    }
    if s.kv_heads is not None:
        request["kv_heads"] = s.kv_heads
    if s.d_c is not None:
        request["latent"] = {"d_c": s.d_c, "d_rope": s.d_rope}
    if s.window is not None:
        request["window"] = s.window
    if s.sinks:
        request["sinks"] = s.sinks
    if s.local_per_global is not None:
        request["layer_pattern"] = {"local_per_global": s.local_per_global, "global_first": s.global_first}
    return {
        "id": preset.id,
        "name": preset.name,
        "request": request,
        "context": preset.context,
        "source": preset.source,
        "note": preset.note,
    }


@blp.route("/presets")
class Presets(MethodView):
    @blp.response(200, ModelConfigListSchema)
    def get(self):
        """Released models' attention as their published configurations state it, each with its source"""
        return {"presets": [preset_json(p) for p in PRESETS]}


@blp.route("")
class Cache(MethodView):
    @blp.arguments(
        CacheRequestSchema(),
        examples={
            "DeepSeek-V2 at 4,096 tokens in bf16": {"value": preset_json(PRESETS[5])["request"] | {"tokens": 4096}},
            "Llama 3 8B (GQA) at 8,192 tokens": {"value": preset_json(PRESETS[1])["request"]},
        },
    )
    @blp.response(200, CacheResponseSchema)
    @blp.problems(*JSON_BODY_ERRORS)
    def post(self, args):
        """The cache's elements and bytes per token and for the context, beside the MHA equivalent"""
        latent, pattern = args.get("latent") or {}, args.get("layer_pattern") or {}
        with engine_errors():
            shape = CacheShape(
                layers=args["layers"],
                heads=args["heads"],
                d_head=args["d_head"],
                kv_heads=args.get("kv_heads"),
                d_c=latent.get("d_c"),
                d_rope=latent.get("d_rope", 0),
                window=args.get("window"),
                sinks=args.get("sinks", 0),
                local_per_global=pattern.get("local_per_global"),
                global_first=pattern.get("global_first", False),
            )
            return memory(shape, args["tokens"], args["bytes_per_element"])
