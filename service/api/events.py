"""`POST /events`: one event or a batch, each recorded exactly once; a batch is atomic. A body the
fast loader is sure of, from a caller the edge identified, is recorded at the edge (`fast`);
the rest by the view, which marshmallow validates and words."""

from __future__ import annotations

from collections import Counter
from typing import Any

from flask import Flask, current_app, request
from flask.views import MethodView

from ..db.events import Counted, EventConflict, NewEvent, record_events, stored_bytes
from ..db.quotas import Stored
from ..edge import JSON, Answer, EdgeRequest, answer_fast
from ..edge.caller import CALLER, Caller
from ..edge.json_codec import dumps_bytes
from ..edge.problems import Problem
from ..identity import Principal
from ..lessons import Checkpoint, Lesson
from ..lessons.prediction import PREDICTIONS
from ..observability import EVENTS
from ..text import N_
from . import storage
from .auth import authorized, needs
from .item_answers import ITEM_EVENTS, answer_problem, in_order, scored
from .schemas.event import EventSchema
from .schemas.events import EventBatchSchema, EventsResultSchema
from .schemas.fast_events import NOT_SURE, fast_events
from .smorest import JSON_BODY_ERRORS, Blueprint

blp = Blueprint(
    "events", __name__, url_prefix="/api/v1/events", description="Learner progress events, recorded exactly once."
)


SERVER_KEYS = ("verification", "challenge")  # written only by the challenge checker


def check_against_lessons(
    events: list[dict[str, Any]], lessons: dict[str, Lesson], browser: bool = False
) -> dict[str, list[str]]:
    """Lesson, checkpoint and completion-data rules; field -> messages (empty when valid).

    `browser`: the caller is a browser session, which may not report its own test results."""
    errors: dict[str, list[str]] = {}
    for i, e in enumerate(events):
        where = f"events.{i}"
        reserved = [k for k in SERVER_KEYS if k in e["data"]]
        if reserved:
            errors[f"{where}.data"] = [f"data.{reserved[0]} is written by the server's challenge checker only"]
            continue
        lesson = lessons.get(e["lesson"])
        if lesson is None:
            errors[f"{where}.lesson"] = [f"unknown lesson {e['lesson']!r}; lessons are {sorted(lessons)}"]
            continue
        if e["event"] in ITEM_EVENTS or e.get("item") is not None:
            if misfit := answer_problem(lesson, e):
                errors[f"{where}.{misfit[0]}"] = [misfit[1]]
            continue
        checkpoint = lesson.checkpoint(e["checkpoint"]) if e["checkpoint"] else None
        if e["checkpoint"] and checkpoint is None:
            errors[f"{where}.checkpoint"] = [
                f"lesson {lesson.id!r} has no checkpoint {e['checkpoint']!r}; "
                f"it has {[c.id for c in lesson.checkpoints]}"
            ]
            continue
        if e["event"] == "completed":
            if checkpoint is None:
                errors[f"{where}.checkpoint"] = ["a completed event names the checkpoint it completes"]
            elif checkpoint.completion != "learner":
                errors[f"{where}.event"] = [
                    f"checkpoint {checkpoint.id!r} completes on {checkpoint.event!r} "
                    f"from explorable {checkpoint.instance_id!r}, not on 'completed'"
                ]
            elif browser and checkpoint.requires == "passing-tests":
                errors[f"{where}.event"] = [
                    f"a browser session completes {checkpoint.id!r} by solving a challenge "
                    "(POST /api/v1/exercises/multi-head-attention/challenges), not by reporting test counts; "
                    "send 'attempted' to record a run"
                ]
            elif problem := _data_problem(checkpoint, e["data"]):
                errors[f"{where}.data"] = [problem]
        elif "manipulation" in e["data"] and (problem := _manipulation_problem(lesson, e)):
            errors[f"{where}.data"] = [problem]
    return errors


def _data_problem(checkpoint: Checkpoint, data: dict[str, Any]) -> str | None:
    """What a learner checkpoint's completion must carry: its requirement, a prediction among its
    choices, and a text that earns it."""
    return (
        _requirement_problem(checkpoint.requires, data)
        or _prediction_problem(checkpoint.prediction, data)
        or checkpoint.text_problem(data["text"] if checkpoint.requires == "text" else "")
    )


def _prediction_problem(prediction: str | None, data: dict[str, Any]) -> str | None:
    """A prediction checkpoint's data.choice, when sent, is one of the prediction's choices."""
    if prediction is None or "choice" not in data:
        return None
    choices = PREDICTIONS[prediction].choices
    return None if data["choice"] in choices else f"data.choice is one of {', '.join(choices)}"


def _manipulation_problem(lesson: Lesson, e: dict[str, Any]) -> str | None:
    """data.manipulation names one of the manipulations of the checkpoint the event counts towards."""
    checkpoint = lesson.counts_towards(e["event"], e["checkpoint"], e.get("instance_id"))
    if checkpoint is None or not checkpoint.manipulations:
        return None
    if e["data"]["manipulation"] not in checkpoint.manipulations:
        return (
            f"data.manipulation {e['data']['manipulation']!r} is not one of checkpoint {checkpoint.id!r}'s "
            f"manipulations: {', '.join(checkpoint.manipulations)}"
        )
    return None


def _requirement_problem(requires: str | None, data: dict[str, Any]) -> str | None:
    if requires == "text":
        text = data.get("text")
        if not isinstance(text, str) or not text.strip():
            return "completing this checkpoint carries the learner's text: data.text, a non-empty string"
    if requires == "passing-tests":
        tests = data.get("tests")
        ok = isinstance(tests, dict) and all(
            isinstance(tests.get(k), int) and not isinstance(tests.get(k), bool) and tests[k] >= 0
            for k in ("passed", "failed")
        )
        if not ok or not isinstance(tests, dict):
            return "completing this checkpoint carries test results: data.tests = {passed: int, failed: int}"
        if tests["failed"] or not tests["passed"]:
            return (
                f"the tests report {tests['passed']} passed and {tests['failed']} failed; the checkpoint "
                "completes when they all pass (send 'attempted' for this run)"
            )
    return None


def to_new_events(principal: Principal, events: list[dict[str, Any]], lessons: dict[str, Lesson]) -> list[NewEvent]:
    missing = {
        f"events.{i}.learner": ["Missing data for required field."]
        for i, e in enumerate(events)
        if not e.get("learner") and principal.learner is None
    }
    if missing:
        raise Problem(422, "every event names its learner", errors=missing)
    foreign = [i for i, e in enumerate(events) if e.get("learner") and not principal.may_act_for(e["learner"])]
    if foreign:
        raise Problem(
            403,
            "a browser session records events for its own learner only",
            errors={f"events.{i}.learner": ["not this session's learner"] for i in foreign},
            slug="forbidden",
        )
    return [
        NewEvent(
            event_id=e["id"],
            learner=e.get("learner") or principal.learner or "",  # checked above: one of them is set
            lesson=e["lesson"],
            checkpoint=e["checkpoint"],
            event=e["event"],
            instance_id=e["instance_id"],
            item=e.get("item"),
            data=scored(lessons.get(e["lesson"]), e),
            occurred_at=e["occurred_at"],
        )
        for e in events
    ]


def sent_alone(body: Any) -> bool:
    """Whether the body was one event on its own (its errors then name its fields bare: `learner`)."""
    return isinstance(body, dict) and "events" not in body


def _named(problem: Problem, alone: bool) -> Problem:
    if alone and problem.errors:
        problem.errors = {k.removeprefix("events.0."): v for k, v in problem.errors.items()}
    return problem


def record(
    app: Flask, principal: Principal, caller: Caller, events: list[dict[str, Any]], alone: bool = False
) -> tuple[int, dict]:
    """Check loaded events against their lessons, the caller and the storage quotas, store them
    exactly once, and answer (status, body); a Problem for what is refused, before anything is
    stored."""
    try:
        if storage.anonymous_learner(caller):
            within_a_sessions_limits(app.extensions["settings"], events)
        return _record(app, principal, events, storage.counted(app, caller))
    except Problem as refused:
        raise _named(refused, alone) from None


def within_a_sessions_limits(settings: Any, events: list[dict[str, Any]]) -> None:
    """A browser session anyone may start sends a few small events at a time: 413 past its batch
    or data size (a platform's key sends up to max_batch_events, each with MAX_DATA_BYTES)."""
    most, biggest = settings.session_batch_events, settings.session_data_bytes
    if len(events) > most:
        raise Problem(
            413,
            N_("a browser session sends at most %(limit)d events at once; this batch has %(count)d"),
            args={"limit": most, "count": len(events)},
            extra={"limit": most},
        )
    for i, e in enumerate(events):
        size = len(dumps_bytes(e.get("data") or {}))
        if size > biggest:
            raise Problem(
                413,
                N_("a browser session's event data is at most %(limit)d bytes of JSON; event %(index)d has %(size)d"),
                args={"limit": biggest, "index": i + 1, "size": size},
                errors={f"events.{i}.data": [f"at most {biggest} bytes of JSON from a browser session"]},
                extra={"limit": biggest},
            )


def _record(app: Flask, principal: Principal, events: list[dict[str, Any]], counting: Counted) -> tuple[int, dict]:
    lessons = app.extensions["lessons"]
    repeated = sorted(i for i, n in Counter(e["id"] for e in events).items() if n > 1)
    if repeated:
        raise Problem(
            400,
            f"a batch repeats event ids: {', '.join(repeated)}",
            slug="duplicate-ids-in-batch",
            errors={"events": [f"id {i} appears more than once" for i in repeated]},
        )
    errors = check_against_lessons(events, lessons, browser=principal.learner is not None)
    if errors:
        raise Problem(422, "some events do not fit the lesson they name; nothing was stored", errors=errors)
    new_events = to_new_events(principal, events, lessons)
    stored = [Stored(e.learner, stored_bytes(e)) for e in new_events]
    storage.check(app, principal.platform_id, stored, counting)
    db = app.extensions["db"]
    in_order(db, principal.platform_id, new_events, lessons)
    result = record_events(db, principal.platform_id, new_events, lessons, counting)  # EventConflict: nothing stored
    EVENTS.labels("created").inc(len(result.created))
    EVENTS.labels("duplicate").inc(len(result.replayed))
    EVENTS.labels("erased").inc(len(result.erased))
    status = result.statuses()
    body = {
        "created": len(result.created),
        "duplicates": len(result.replayed) + len(result.erased),
        "events": [{"id": e.event_id, "status": status[e.event_id]} for e in new_events],
        "completed": [
            {"learner": learner, "lesson": lesson, "checkpoint": cp} for learner, lesson, cp in result.completed
        ],
    }
    return (201 if result.created else 200), body


def conflict(exc: EventConflict) -> Problem:
    return Problem(
        409,
        "these event ids are already stored with different content; nothing in this "
        f"request was stored: {', '.join(exc.event_ids)}",
        slug="event-conflict",
        errors={"events": [f"{i} conflicts with the stored event" for i in exc.event_ids]},
        extra={"conflicts": exc.event_ids},
    )


def fast(req: EdgeRequest) -> Answer | None:
    """Record a body the fast loader is sure of, from a caller allowed to write; else None."""
    who = req.caller
    if who.refused or who.basic or who.principal is None or "events:write" not in who.principal.scopes:
        return None  # the view says what is missing
    app = req.app
    try:
        events = fast_events(req.data, app.extensions["settings"].max_batch_events)
    except NOT_SURE:
        return None
    try:
        status, body = record(app, who.principal, who, events, sent_alone(req.data))
    except EventConflict as exc:
        raise conflict(exc) from None
    return Answer(status, dumps_bytes(body))


# One event alone, or {"events": [...]}: both forms documented, with an example of each for "Try it out".
_EXAMPLE_EVENT = {
    "id": "0b9f5a8e-3f5e-4b0e-9a51-1f1d2f6b8c11",
    "learner": "student-42",
    "lesson": "multi-head-attention",
    "checkpoint": "predict",
    "event": "completed",
    "data": {"text": "two features per head"},
    "occurred_at": "2026-11-29T10:00:00Z",
}
ONE_OR_MANY = {
    "content": {
        "application/json": {
            "schema": {"oneOf": [EventSchema, EventBatchSchema]},
            "examples": {
                "one event": {"value": _EXAMPLE_EVENT},
                "a batch": {
                    "value": {
                        "events": [
                            {
                                **_EXAMPLE_EVENT,
                                "id": "5d1c0a52-8a43-4b51-9c1e-2b7f0c9e4a10",
                                "checkpoint": "explain",
                                "event": "started",
                                "data": {},
                            },
                            {
                                **_EXAMPLE_EVENT,
                                "id": "8f2e6b1d-0c3a-4f7e-a5d9-3e8b1c2d4f60",
                                "checkpoint": "explain",
                                "data": {
                                    "text": "both heads reading head 1's features attend alike: head 2's slice is lost"
                                },
                            },
                        ]
                    }
                },
            },
        }
    }
}


@blp.route("")
class Events(MethodView):
    @answer_fast(fast)
    @needs("events:write")
    @blp.arguments(EventBatchSchema())
    @blp.doc(requestBody=ONE_OR_MANY)
    @blp.response(201, EventsResultSchema, description="At least one event was new")
    @blp.alt_response(200, schema=EventsResultSchema, description="Every event was an identical replay")
    @blp.problems(401, 403, 409, 503, *JSON_BODY_ERRORS)
    def post(self, args):
        """Record one event, or a batch of events atomically"""
        principal = authorized()
        try:
            alone = sent_alone(request.environ.get(JSON))
            status, body = record(current_app, principal, request.environ[CALLER], args["events"], alone)
        except EventConflict as exc:
            raise conflict(exc) from None
        return current_app.response_class(dumps_bytes(body), status=status, mimetype="application/json")
