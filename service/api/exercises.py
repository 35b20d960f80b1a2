"""`POST /exercises/multi-head-attention/check`: diagnose a learner's output; no learner code runs here."""

from __future__ import annotations

from typing import Any

import numpy as np
from flask import current_app, send_from_directory
from flask.views import MethodView
from marshmallow import Schema, ValidationError, fields, pre_load, validate

from ..compute import AttentionInputError
from ..compute.diagnose import MISTAKES, diagnose
from ..config import ROOT
from ..db.models import ExerciseCheck
from .auth import optional_principal
from .core import JSON_BODY_ERRORS, Blueprint
from .event_schemas import name
from .fields import Matrix, SafeString, StrictBoolean, StrictInteger, parse_matrix
from .problems import Problem

blp = Blueprint(
    "exercises",
    __name__,
    url_prefix="/api/v1/exercises",
    description="The lesson's exercise: diagnose an output, download the starter.",
)

LESSON = "multi-head-attention"
EXERCISE_DIR = ROOT / "exercises" / "multi-head-attention"
MAX_N, MAX_D = 32, 64  # exercise-sized cases


class Tensor3(fields.Field):
    """[a][b][c] numbers: a list of equal-shape matrices."""

    def _deserialize(self, value, attr, data, **kwargs) -> np.ndarray:
        if not isinstance(value, list) or not value:
            raise ValidationError("must be a non-empty list of matrices")
        matrices = []
        for i, item in enumerate(value):
            try:
                matrices.append(parse_matrix(item))
            except ValidationError as exc:
                raise ValidationError(f"matrix {i + 1} (counting from 1): {exc.messages[0]}") from None
        if len({m.shape for m in matrices}) != 1:
            raise ValidationError("every matrix must have the same shape")
        return np.stack(matrices)


class CaseSchema(Schema):
    tokens = Matrix(required=True)
    heads = StrictInteger(required=True, validate=validate.Range(min=1, max=MAX_D))
    causal = StrictBoolean(load_default=True)


class OutputSchema(Schema):
    weights = Tensor3(metadata={"description": "[H][n][n]"})
    head_outputs = Tensor3(metadata={"description": "[H][n][d_head]"})
    concatenated = Matrix(metadata={"description": "[n][d_model]"})


class CheckSchema(Schema):
    case = fields.Nested(CaseSchema, required=True)
    output = fields.Nested(OutputSchema, required=True)
    learner = SafeString(
        validate=name(128),
        metadata={"description": "platform keys: whose check this is (browser sessions: always the session's learner)"},
    )

    @pre_load
    def _small_cases_only(self, data, **kwargs):
        tokens = (
            data.get("case", {}).get("tokens")
            if isinstance(data, dict) and isinstance(data.get("case"), dict)
            else None
        )
        if isinstance(tokens, list) and (
            len(tokens) > MAX_N or (tokens and isinstance(tokens[0], list) and len(tokens[0]) > MAX_D)
        ):
            raise Problem(
                413,
                f"exercise cases are at most {MAX_N} tokens of width {MAX_D}",
                errors={"case.tokens": [f"at most {MAX_N} x {MAX_D}"]},
                slug="over-limit",
                extra={"limits": {"tokens": MAX_N, "d_model": MAX_D}},
            )
        return data


class CheckResultSchema(Schema):
    correct = fields.Boolean()
    max_abs_error = fields.Float()
    diagnosis = fields.String(
        allow_none=True,
        metadata={"description": "the mistake's id when the output shows exactly one known mistake, else null"},
    )
    mistakes = fields.List(fields.String(), metadata={"description": "every known mistake the output shows"})
    message = fields.String()
    recorded = fields.Boolean(metadata={"description": "stored for the identified learner"})


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
        recorded = learner is not None
        if recorded:
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
        session.add(
            ExerciseCheck(
                platform_id=platform_id,
                learner=learner,
                lesson=LESSON,
                case={"tokens": case["tokens"].tolist(), "heads": case["heads"], "causal": case["causal"]},
                correct=result.correct,
                max_abs_error=result.max_abs_error,
                diagnosis=",".join(result.mistakes) or None,
            )
        )


class MistakesSchema(Schema):
    mistakes = fields.Dict(keys=fields.String(), values=fields.String())


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
