"""`GET /failure-modes`: the one registry of mistakes, for pages and platforms (service/compute/failure_modes.py)."""

from __future__ import annotations

from flask.views import MethodView

from ..compute.failure_modes import as_json
from ..i18n import current, translate
from .schemas.failure_modes import FailureModesSchema
from .smorest import Blueprint

blp = Blueprint(
    "failure_modes",
    __name__,
    url_prefix="/api/v1/failure-modes",
    description="The known ways to get multi-head attention wrong: names, descriptions, advice.",
)


@blp.route("")
class FailureModes(MethodView):
    @blp.response(200, FailureModesSchema)
    def get(self):
        """Every failure mode the engine computes and every slip the checker names

        `name`, `description` and `advice` are in the request's language (`?lang=`, the
        `workbench_lang` cookie, `Accept-Language`); `id` is the same in every language."""
        locale = current()
        words = ("name", "description", "advice")
        modes = [{**m, **{k: translate(str(m[k]), locale) for k in words}} for m in as_json()]
        return {"failure_modes": modes}, 200, {"Content-Language": locale, "Vary": "Accept-Language, Cookie"}
