"""Verified exercise results: a learner gets fresh random cases, their own code answers them on
their machine (`workbench exercise submit`, or the lesson's paste box), and the server checks the
numbers with its engine. Solving a challenge is how a browser learner completes `implement`.

The challenge id is a 128-bit random secret bound to one learner: the terminal that holds it may
read the cases and answer without the browser's cookie.
"""

from __future__ import annotations

import datetime as dt
import secrets
import uuid
from typing import Any

import numpy as np
from flask import current_app, url_for
from flask.views import MethodView
from marshmallow import Schema, ValidationError, fields, validate
from sqlalchemy import update

from ..compute import AttentionInputError
from ..compute.challenge import check_answers, new_cases
from ..db.events import NewEvent, record_events_in
from ..db.models import ExerciseChallenge, ExerciseCheck
from .auth import current_principal, optional_principal
from .core import JSON_BODY_ERRORS, Blueprint
from .event_schemas import name
from .fields import SafeString
from .problems import Problem

blp = Blueprint(
    "challenges",
    __name__,
    url_prefix="/api/v1/exercises",
    description="Verified exercise results: random cases answered by the learner's own code.",
)

LESSON, CHECKPOINT = "multi-head-attention", "implement"
MAX_ANSWER_CELLS = 4096  # the cases are at most 6 tokens x 8: generous, still tiny


class Numbers(fields.Field):
    """A rectangular nested list of numbers with `ndim` axes; null stands for NaN (JSON has none)."""

    def __init__(self, ndim: int, **kwargs: Any):
        super().__init__(metadata={"description": f"{ndim}-d nested lists of numbers; null for NaN"}, **kwargs)
        self.ndim = ndim

    def _deserialize(self, value, attr, data, **kwargs) -> np.ndarray:
        cells: list[float] = []
        shape = _shape(value, self.ndim, cells, "")
        return np.array(cells, dtype=np.float64).reshape(shape)


def _shape(value: Any, ndim: int, cells: list[float], where: str) -> tuple[int, ...]:
    if ndim == 0:
        if value is None:
            cells.append(np.nan)
        elif type(value) in (int, float):
            cells.append(float(value))
        else:
            raise ValidationError(f"{where or 'the value'} must be a number or null")
        return ()
    if not isinstance(value, list) or not value:
        raise ValidationError(f"{where or 'the value'} must be a non-empty list")
    if len(cells) + len(value) > MAX_ANSWER_CELLS:
        raise ValidationError(f"an answer holds at most {MAX_ANSWER_CELLS} numbers")
    shapes = {_shape(item, ndim - 1, cells, f"{where}[{i}]") for i, item in enumerate(value)}
    if len(shapes) != 1:
        raise ValidationError(f"{where or 'the value'} is not rectangular: its items differ in shape")
    return (len(value), *shapes.pop())


class ChallengeAnswerSchema(Schema):
    weights = Numbers(3, required=True)
    head_outputs = Numbers(3, required=True)
    concatenated = Numbers(2, required=True)
    output = Numbers(2, required=True)


class AnswersSchema(Schema):
    answers = fields.List(
        fields.Nested(ChallengeAnswerSchema),
        required=True,
        validate=validate.Length(min=1, max=8),
        metadata={"description": "one answer per case, in the challenge's order"},
    )


class NewChallengeSchema(Schema):
    learner = SafeString(
        validate=name(128),
        metadata={"description": "platform keys: whose challenge this is (browser sessions: always their own)"},
    )


class ChallengeCaseSchema(Schema):
    tokens = fields.List(fields.List(fields.Float()))
    heads = fields.Integer()
    causal = fields.Boolean()
    output_projection = fields.List(fields.List(fields.Float()), allow_none=True)


class CaseVerdictSchema(Schema):
    case = fields.Integer(metadata={"description": "1-based"})
    correct = fields.Boolean()
    max_abs_error = fields.Float()
    mistakes = fields.List(fields.String())
    message = fields.String()


class VerdictSchema(Schema):
    correct = fields.Boolean()
    mistakes = fields.List(fields.String(), metadata={"description": "every mistake named in any case"})
    message = fields.String()
    cases = fields.List(fields.Nested(CaseVerdictSchema))
    completed = fields.Boolean(metadata={"description": "this answer completed the learner's checkpoint"})


class ChallengeSchema(Schema):
    id = fields.String()
    lesson = fields.String()
    checkpoint = fields.String()
    status = fields.String(metadata={"description": "open, solved or expired"})
    cases = fields.List(fields.Nested(ChallengeCaseSchema))
    created_at = fields.DateTime()
    expires_at = fields.DateTime()
    attempts = fields.Integer()
    answers_url = fields.String()
    result = fields.Nested(VerdictSchema, allow_none=True, metadata={"description": "the latest verdict"})


@blp.route("/multi-head-attention/challenges")
class Challenges(MethodView):
    @blp.arguments(NewChallengeSchema())
    @blp.response(201, ChallengeSchema)
    @blp.problems(401, 403, 503, *JSON_BODY_ERRORS)
    def post(self, args):
        """Issue fresh random cases to a learner (valid for a limited time)"""
        principal = current_principal("events:write")
        learner = principal.learner or args.get("learner")
        if learner is None:
            raise Problem(422, "a platform names the learner the challenge is for", errors={"learner": ["required"]})
        if not principal.may_act_for(learner):
            raise Problem(403, "a browser session gets challenges for its own learner only", slug="forbidden")
        now = dt.datetime.now(dt.UTC)
        challenge = ExerciseChallenge(
            id=secrets.token_hex(16),
            platform_id=principal.platform_id,
            learner=learner,
            lesson=LESSON,
            checkpoint=CHECKPOINT,
            cases=new_cases(np.random.default_rng(secrets.randbits(128))),
            created_at=now,
            expires_at=now + dt.timedelta(seconds=current_app.extensions["settings"].challenge_ttl_seconds),
            attempts=0,
        )
        with current_app.extensions["db"].write() as session:
            session.add(challenge)
        return _json(challenge, now)


@blp.route("/multi-head-attention/challenges/<string:challenge_id>")
class Challenge(MethodView):
    @blp.response(200, ChallengeSchema)
    @blp.problems(404)
    def get(self, challenge_id):
        """A challenge's cases and status (the id is the credential)"""
        return _json(_find(challenge_id), dt.datetime.now(dt.UTC))


@blp.route("/multi-head-attention/challenges/<string:challenge_id>/answers")
class Answers(MethodView):
    @blp.arguments(AnswersSchema())
    @blp.response(200, VerdictSchema)
    @blp.problems(404, 409, 410, 503, *JSON_BODY_ERRORS)
    def post(self, args, challenge_id):
        """Check the learner's answers with the engine; a full solution completes the checkpoint"""
        challenge = _find(challenge_id)
        now = dt.datetime.now(dt.UTC)
        if challenge.solved_at is not None:
            raise Problem(409, "this challenge is already solved; ask for a new one to check again", slug="solved")
        if challenge.expires_at <= now:
            raise Problem(410, "this challenge has expired; ask for a new one", slug="expired")
        if len(args["answers"]) != len(challenge.cases):
            raise Problem(
                422,
                f"this challenge has {len(challenge.cases)} cases; send one answer for each, in order",
                errors={"answers": [f"expected {len(challenge.cases)} answers, got {len(args['answers'])}"]},
            )
        try:
            verdict = check_answers(challenge.cases, args["answers"])
        except AttentionInputError as exc:
            raise Problem(422, str(exc), errors={exc.field or "answers": [str(exc)]}) from None
        result = {
            "correct": verdict.correct,
            "mistakes": verdict.mistakes,
            "message": verdict.message(challenge.cases),
            "cases": [
                {
                    "case": i + 1,
                    "correct": d.correct,
                    "max_abs_error": d.max_abs_error,
                    "mistakes": list(d.mistakes),
                    "message": d.message,
                }
                for i, d in enumerate(verdict.cases)
            ],
        }
        result["completed"] = _record(challenge, result, now)
        return result


def _find(challenge_id: str) -> ExerciseChallenge:
    if len(challenge_id) != 32 or any(c not in "0123456789abcdef" for c in challenge_id):
        raise Problem(404, "no such challenge (an id is 32 hex digits)", slug="not-found")
    with current_app.extensions["db"].session() as session:
        challenge = session.get(ExerciseChallenge, challenge_id)
        if challenge is not None:
            session.expunge(challenge)
    principal = optional_principal("events:write")
    foreign = principal is not None and (
        principal.platform_id != getattr(challenge, "platform_id", None)
        or not principal.may_act_for(getattr(challenge, "learner", ""))
    )
    if challenge is None or foreign:
        raise Problem(404, "no such challenge", slug="not-found")
    return challenge


def _record(challenge: ExerciseChallenge, result: dict[str, Any], now: dt.datetime) -> bool:
    """One transaction: the attempt, each case's diagnosis, and the learner's event (completion
    when solved). Two answers racing to solve: the first wins, the second is a 409."""
    db = current_app.extensions["db"]
    table = ExerciseChallenge.__table__
    data: dict[str, Any] = {"verification": "verified", "challenge": challenge.id, "cases": len(challenge.cases)}
    if not result["correct"]:
        data["mistakes"] = result["mistakes"]
    event = NewEvent(
        event_id=str(uuid.uuid4()),
        learner=challenge.learner,
        lesson=challenge.lesson,
        checkpoint=challenge.checkpoint,
        event="completed" if result["correct"] else "attempted",
        instance_id=None,
        data=data,
        occurred_at=now,
    )
    stored = {k: v for k, v in result.items() if k != "completed"}
    with db.transaction() as conn:
        claimed = conn.execute(
            update(table)
            .where(table.c.id == challenge.id, table.c.solved_at.is_(None))
            .values(
                attempts=table.c.attempts + 1,
                last_result=stored,
                solved_at=now if result["correct"] else None,
            )
        ).rowcount
        if not claimed:
            raise Problem(409, "this challenge is already solved; ask for a new one to check again", slug="solved")
        conn.execute(
            ExerciseCheck.__table__.insert(),
            [
                {
                    "platform_id": challenge.platform_id,
                    "learner": challenge.learner,
                    "lesson": challenge.lesson,
                    "case": {**case, "challenge": challenge.id},
                    "correct": verdict["correct"],
                    "max_abs_error": verdict["max_abs_error"],
                    "diagnosis": ",".join(verdict["mistakes"]) or None,
                    "created_at": now,
                }
                for case, verdict in zip(challenge.cases, result["cases"], strict=True)
            ],
        )
        recorded = record_events_in(conn, challenge.platform_id, [event], current_app.extensions["lessons"])
    return bool(recorded.completed)


def _json(challenge: ExerciseChallenge, now: dt.datetime) -> dict[str, Any]:
    status = "solved" if challenge.solved_at else ("expired" if challenge.expires_at <= now else "open")
    return {
        "id": challenge.id,
        "lesson": challenge.lesson,
        "checkpoint": challenge.checkpoint,
        "status": status,
        "cases": challenge.cases,
        "created_at": challenge.created_at,
        "expires_at": challenge.expires_at,
        "attempts": challenge.attempts,
        "answers_url": url_for("challenges.Answers", challenge_id=challenge.id, _external=True),
        "result": challenge.last_result,
    }
