"""Verified exercise results: a learner gets fresh random cases, their own code answers them on
their machine (`workbench exercise submit`, or the lesson's paste box), and the server checks the
numbers with its engine. Solving a challenge is how a browser learner completes `implement`.
`POST /exercises/{exercise}/challenges`, `GET /exercises/{exercise}/challenges/{id}`, and the answers:
`POST /exercises/multi-head-attention/challenges/{id}/answers`,
`POST /exercises/online-softmax/challenges/{id}/answers`.

The challenge id is a 128-bit random secret bound to one learner: the terminal that holds it may
read the cases and answer without the browser's cookie.
"""

from __future__ import annotations

import datetime as dt
import secrets
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
from flask import current_app, url_for
from flask.views import MethodView

from ..compute import AttentionInputError
from ..db import challenges as challenges_db
from ..db.events import NewEvent
from ..db.tables import ExerciseChallenge
from ..edge import EdgeRequest, costs
from ..edge.problems import Problem
from ..exercise.challenge import Verdict, check_answers, new_cases
from ..exercise.diagnose import traces_per_diagnosis
from ..exercise.online import RUNS
from ..i18n import speaker
from ..text import N_
from .attention import offload as heavy
from .attention import shortcut
from .attention.caps import cost, most, tiled_size
from .auth import authorized, needs
from .schemas.exercises import (
    AnswersSchema,
    ChallengeSchema,
    NewChallengeSchema,
    OnlineAnswersSchema,
    VerdictSchema,
)
from .smorest import JSON_BODY_ERRORS, Blueprint

blp = Blueprint(
    "challenges",
    __name__,
    url_prefix="/api/v1/exercises",
    description="Verified exercise results: random cases answered by the learner's own code.",
)

# Each exercise's challenge completes its lesson's `implement` checkpoint (the lesson has the exercise's id).
EXERCISE, CHECKPOINT = "<any('multi-head-attention', 'online-softmax'):exercise>", "implement"
ATTEMPTS = 30  # answers one challenge takes; then the learner asks for fresh cases

SOLVED = N_("this challenge is already solved; ask for a new one to check again")


def verification_cells(req: EdgeRequest) -> int | None:
    """What checking the answers charges: for each answer, one trace's cells for the correct result
    and each combination of mistakes the checker may try (measured on the answer's own shapes); a
    body too large to parse here, as the largest trace checked that way."""
    return _cells(
        req,
        traces_per_diagnosis(True, True),
        lambda a: len(a["weights"]) * len(a["concatenated"]) ** 2 + len(a["concatenated"]) * len(a["concatenated"][0]),
    )


def online_verification_cells(req: EdgeRequest) -> int | None:
    """The same for the online softmax: a case's plain pass and its tiles (the blocks are the stored
    case's, so charged as the most tiles, 1 x 1), for each loop the checker may run."""

    def one(answer: dict[str, Any]) -> int:
        tokens = [[0.0] * len(answer["output"][0])] * len(answer["output"])
        size = tiled_size({"tokens": tokens, "heads": 1, "block_q": 1, "block_k": 1})
        return cost(tokens, 1) + (size[1] if size else 0)

    return _cells(req, RUNS, one)


def _cells(req: EdgeRequest, runs: int, one: Callable[[dict[str, Any]], int]) -> int | None:
    if not req.parsed:
        return most(req.app.extensions["settings"]) * runs
    try:
        return sum(one(answer) for answer in req.data["answers"]) * runs
    except (KeyError, TypeError, IndexError):
        return None  # not an answers body: the schema says what is wrong


@blp.route(f"/{EXERCISE}/challenges")
class Challenges(MethodView):
    @needs("events:write")
    @blp.arguments(NewChallengeSchema(), example={"learner": "student-42"})
    @blp.response(201, ChallengeSchema)
    @blp.problems(401, 403, 503, *JSON_BODY_ERRORS)
    def post(self, args, exercise):
        """Issue fresh random cases of the exercise to a learner (valid for a limited time)"""
        principal = authorized()
        learner = principal.learner or args.get("learner")
        if learner is None:
            raise Problem(422, "a platform names the learner the challenge is for", errors={"learner": ["required"]})
        if not principal.may_act_for(learner):
            raise Problem(403, N_("a browser session gets challenges for its own learner only"), slug="forbidden")
        now = dt.datetime.now(dt.UTC)
        challenge = ExerciseChallenge(
            id=secrets.token_hex(16),
            platform_id=principal.platform_id,
            learner=learner,
            lesson=exercise,
            checkpoint=CHECKPOINT,
            cases=new_cases(np.random.default_rng(secrets.randbits(128)), exercise),
            created_at=now,
            expires_at=now + dt.timedelta(seconds=current_app.extensions["settings"].challenge_ttl_seconds),
            attempts=0,
        )
        with current_app.extensions["db"].write() as session:
            challenges_db.add_challenge(session, challenge)
        shortcut.remember(challenge.cases, current_app.extensions["settings"].challenge_ttl_seconds)
        return _json(challenge, now)


@blp.route(f"/{EXERCISE}/challenges/<string:challenge_id>")
class Challenge(MethodView):
    @needs("events:write", optional=True)
    @blp.response(200, ChallengeSchema)
    @blp.problems(404)
    def get(self, exercise, challenge_id):
        """A challenge's cases and status (the id is the credential)"""
        return _json(_find(challenge_id, exercise), dt.datetime.now(dt.UTC))


@blp.route("/multi-head-attention/challenges/<string:challenge_id>/answers")
class Answers(MethodView):
    @costs(verification_cells)
    @needs("events:write", optional=True)
    @blp.arguments(
        AnswersSchema(),
        description="One answer per case, in order, each holding `weights` [heads][n][n] and `output` [n][d_model] "
        "for that case (the example's shapes are one case's; a challenge's cases have their own).",
        example={
            "answers": [
                {
                    "weights": [[[1, 0], [0.5, 0.5]], [[1, 0], [0.2689414, 0.7310586]]],
                    "head_outputs": [[[1], [0.5]], [[0], [0.7310586]]],
                    "concatenated": [[1, 0], [0.5, 0.7310586]],
                    "output": [[1, 0], [0.5, 0.7310586]],
                }
            ]
        },
    )
    @blp.response(200, VerdictSchema)
    @blp.problems(404, 409, 410, 429, 503, *JSON_BODY_ERRORS)
    def post(self, args, challenge_id):
        """Check the learner's answers with the engine; a full solution completes the checkpoint"""
        return answer(args, _find(challenge_id, "multi-head-attention"))


@blp.route("/online-softmax/challenges/<string:challenge_id>/answers")
class OnlineAnswers(MethodView):
    @costs(online_verification_cells)
    @needs("events:write", optional=True)
    @blp.arguments(
        OnlineAnswersSchema(),
        description="One answer per case, in order, each holding `output` [n][d] and `lse` [n] for that case.",
        example={"answers": [{"output": [[1, 0], [0.5, 0.5]], "lse": [0.7071, 0.6931]}]},
    )
    @blp.response(200, VerdictSchema)
    @blp.problems(404, 409, 410, 429, 503, *JSON_BODY_ERRORS)
    def post(self, args, challenge_id):
        """Check the learner's online softmax with the engine's tiled loop; a full solution completes the checkpoint"""
        return answer(args, _find(challenge_id, "online-softmax"))


def answer(args: dict[str, Any], challenge: ExerciseChallenge) -> dict[str, Any]:
    """The verdict on a challenge's answers, recorded (the attempt, each case, the learner's event)."""
    now = dt.datetime.now(dt.UTC)
    if challenge.solved_at is not None:
        raise Problem(409, SOLVED, slug="solved")
    if challenge.expires_at <= now:
        raise Problem(410, N_("this challenge has expired; ask for a new one"), slug="expired")
    if challenge.attempts >= ATTEMPTS:
        raise Problem(
            429,
            N_("this challenge has taken its %(attempts)d answers; ask for a new one (fresh cases)"),
            args={"attempts": ATTEMPTS},
            slug="attempts",
        )
    if len(args["answers"]) != len(challenge.cases):
        raise Problem(
            422,
            N_("this challenge has %(cases)d cases; send one answer for each, in order"),
            args={"cases": len(challenge.cases)},
            errors={"answers": [f"expected {len(challenge.cases)} answers, got {len(args['answers'])}"]},
        )
    try:
        verdict = heavy.computed(check_answers, challenge.cases, args["answers"])
    except AttentionInputError as exc:
        raise Problem(422, str(exc), errors={exc.field or "answers": [str(exc)]}) from None
    engine_seen = verdict.correct and shortcut.seen(challenge.cases)
    result = verdict.as_json(challenge.cases, engine_seen)  # kept in English, answered in the caller's language
    completed = _record(challenge, result, now, engine_seen)
    return {**in_language(result, challenge.cases), "completed": completed}


def _find(challenge_id: str, exercise: str) -> ExerciseChallenge:
    if len(challenge_id) != 32 or any(c not in "0123456789abcdef" for c in challenge_id):
        raise Problem(404, N_("no such challenge (an id is 32 hex digits)"), slug="not-found")
    with current_app.extensions["db"].read() as session:
        challenge = challenges_db.find_challenge(session, challenge_id)
    principal = authorized()
    foreign = principal is not None and (
        principal.platform_id != getattr(challenge, "platform_id", None)
        or not principal.may_act_for(getattr(challenge, "learner", ""))
    )
    if challenge is None or foreign or challenge.lesson != exercise:
        raise Problem(404, N_("no such challenge"), slug="not-found")
    return challenge


def _record(challenge: ExerciseChallenge, result: dict[str, Any], now: dt.datetime, engine_seen: bool) -> bool:
    """One transaction: the attempt, each case's diagnosis, and the learner's event (completion
    when solved). Two answers racing to solve: the first wins, the second is a 409."""
    data: dict[str, Any] = {"verification": "verified", "challenge": challenge.id, "cases": len(challenge.cases)}
    if engine_seen:
        data["engine_seen"] = True  # the shortcut, visible (service/api/attention/shortcut.py)
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
    try:
        with current_app.extensions["db"].write() as session:
            return challenges_db.record_answer(session, challenge, result, event, current_app.extensions["lessons"])
    except challenges_db.ChallengeSolved:
        raise Problem(409, SOLVED, slug="solved") from None


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
        "answers_url": current_app.extensions["settings"].public_base
        + url_for(
            "challenges.OnlineAnswers" if challenge.lesson == "online-softmax" else "challenges.Answers",
            challenge_id=challenge.id,
        ),
        "result": in_language(challenge.last_result, challenge.cases) if challenge.last_result else None,
    }


def in_language(kept: dict[str, Any], cases: list[dict[str, Any]]) -> dict[str, Any]:
    """A kept verdict's words in the request's language (one kept before verdicts were kept as
    data, without `engine_seen`, is answered as it was written)."""
    if "engine_seen" not in kept:
        return kept
    said = Verdict.from_json(kept).as_json(cases, kept["engine_seen"], speaker())
    return {**kept, **said}
