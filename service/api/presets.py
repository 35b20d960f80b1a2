"""Ready request bodies: `GET /presets`, `GET /presets/{id}`."""

from __future__ import annotations

from flask.views import MethodView

from ..edge.problems import Problem
from ..presets import presets
from .schemas.attention import PresetListSchema, PresetSchema
from .smorest import Blueprint

blp = Blueprint("presets", __name__, url_prefix="/api/v1/presets", description="Ready bodies for the compute routes.")


@blp.route("")
class Presets(MethodView):
    @blp.response(200, PresetListSchema)
    def get(self):
        """List the presets"""
        return {"presets": [{k: p[k] for k in ("id", "endpoint", "title", "description")} for p in presets().values()]}


@blp.route("/<string:preset_id>")
class Preset(MethodView):
    @blp.response(200, PresetSchema)
    @blp.problems(404)
    def get(self, preset_id):
        """One preset: a request body ready for the endpoint it names"""
        preset = presets().get(preset_id)
        if preset is None:
            raise Problem(404, f"no preset {preset_id!r}; presets are {sorted(presets())}")
        return preset
