"""`POST /exercises/multi-head-attention/check`: diagnose a learner's output; no learner code runs here."""

from __future__ import annotations

from typing import Any

from flask import current_app, send_from_directory
from flask.views import MethodView

from ..compute import AttentionInputError
from ..compute.diagnose import MISTAKES, diagnose
from ..config import ROOT
from ..db import challenges as challenges_db
from ..edge.problems import Problem
from .auth import optional_principal
from .schemas.exercises import CheckResultSchema, CheckSchema, MistakesSchema
from .smorest import JSON_BODY_ERRORS, Blueprint

blp = Blueprint(
    "exercises",
    __name__,
    url_prefix="/api/v1/exercises",
    description="The lesson's exercise: diagnose an output, download the starter.",
)

LESSON = "multi-head-attention"
EXERCISE_DIR = ROOT / "exercises" / "multi-head-attention"


@blp.route("/multi-head-attention/check")
class Check(MethodView):
    @blp.arguments(CheckSchema())
    @blp.response(200, CheckResultSchema)
    @blp.problems(401, 403, 503, *JSON_BODY_ERRORS)
    def post(self, args):
        """Check a learner's output for a case and name the mistake it shows, if a known one"""
        case, output = args["case"], args["output"]
        try:
            result = diagnose(case["tokens"], case["heads"], case["causal"], output)
        except AttentionInputError as exc:
            raise Problem(422, str(exc), errors={exc.field or "case": [str(exc)]}) from None
        principal = optional_principal("events:write")
        learner = None
        if principal is not None:
            if args.get("learner") and not principal.may_act_for(args["learner"]):
                raise Problem(403, "a browser session checks for its own learner only", slug="forbidden")
            learner = principal.learner or args.get("learner")
        recorded = principal is not None and learner is not None
        if principal is not None and learner is not None:
            _record(principal.platform_id, learner, case, result)
        return {
            "correct": result.correct,
            "max_abs_error": result.max_abs_error,
            "diagnosis": result.diagnosis,
            "mistakes": list(result.mistakes),
            "message": result.message,
            "recorded": recorded,
        }


def _record(platform_id: int, learner: str, case: dict[str, Any], result) -> None:
    """Keep the diagnosis for analytics. A check never completes the checkpoint: the learner chose
    the case and could have copied the numbers; a challenge (random cases) is what verifies."""
    with current_app.extensions["db"].write() as session:
        challenges_db.add_check(
            session,
            platform_id,
            learner,
            LESSON,
            {"tokens": case["tokens"].tolist(), "heads": case["heads"], "causal": case["causal"]},
            result.correct,
            result.max_abs_error,
            list(result.mistakes),
        )


@blp.route("/multi-head-attention/mistakes")
class Mistakes(MethodView):
    @blp.response(200, MistakesSchema)
    def get(self):
        """The mistakes the checker recognises, with the message a learner sees"""
        return {"mistakes": MISTAKES}


@blp.route("/multi-head-attention/starter.py")
class Starter(MethodView):
    @blp.response(200, content_type="text/x-python", description="The starter file, as a download")
    def get(self):
        """Download the exercise starter"""
        return send_from_directory(EXERCISE_DIR, "starter.py", mimetype="text/x-python", as_attachment=True)
