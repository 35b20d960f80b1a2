"""One learner's progress and events, and their erasure: `GET /learners/{learner}/progress`,
`GET /learners/{learner}/events`, `DELETE /learners/{learner}`. Another platform's learner is a 404."""

from __future__ import annotations

import logging

from flask import current_app
from flask.views import MethodView

from ..db import locales
from ..db.erasure import erase_everywhere
from ..db.progress import event_json, learner_events, learner_exists, learner_progress
from ..db.stores import store_of
from ..edge.problems import Problem
from ..identity import Principal
from . import cursors
from .auth import authorized, needs
from .schemas.events import EventPageSchema, PageArgsSchema
from .schemas.learners import ErasureSchema, ProgressArgsSchema, ProgressSchema
from .smorest import Blueprint

blp = Blueprint(
    "learners", __name__, url_prefix="/api/v1/learners", description="A learner's progress and events; erasure."
)

ERASURE_POLICY = (
    "replays of erased event ids are acknowledged with status 'erased' and not stored again; "
    "new event ids for this learner id start a new record"
)

log = logging.getLogger(__name__)


def _not_found(learner: str) -> Problem:
    return Problem(404, "no such learner for this platform", slug="not-found")


def _visible(principal: Principal, learner: str) -> None:
    if not principal.may_act_for(learner):
        raise _not_found(learner)
    if principal.learner == learner:
        return  # a browser learner always has their own record, empty before their first event
    with current_app.extensions["db"].read() as session:
        if not learner_exists(session, principal.platform_id, learner):
            raise _not_found(learner)


@blp.route("/<string:learner>/progress")
class Progress(MethodView):
    @needs("progress:read")
    @blp.arguments(ProgressArgsSchema(), location="query")
    @blp.response(200, ProgressSchema)
    @blp.problems(401, 403, 404, 422, 429, 503)
    def get(self, args, learner):
        """A learner's checkpoint progress, per lesson"""
        principal = authorized()
        lessons = current_app.extensions["lessons"]
        if args["lesson"] is not None and args["lesson"] not in lessons:
            raise Problem(404, f"no lesson {args['lesson']!r}", slug="not-found")
        _visible(principal, learner)
        chosen = [lessons[args["lesson"]]] if args["lesson"] else list(lessons.values())
        with current_app.extensions["db"].read() as session:
            progress = learner_progress(session, principal.platform_id, learner, chosen)
            locale = locales.of(session, principal.platform_id, [learner]).get(learner)
        return {"learner": learner, "locale": locale, "lessons": progress}


@blp.route("/<string:learner>/events")
class LearnerEvents(MethodView):
    @needs("progress:read")
    @blp.arguments(PageArgsSchema(), location="query")
    @blp.response(200, EventPageSchema)
    @blp.problems(400, 401, 403, 404, 422, 429, 503)
    def get(self, args, learner):
        """A learner's events in the order they were stored, a page at a time"""
        principal = authorized()
        _visible(principal, learner)
        after = decode_cursor(args["cursor"])
        with current_app.extensions["db"].read() as session:
            rows = learner_events(session, principal.platform_id, learner, after, args["limit"] + 1)
        page = rows[: args["limit"]]
        more = len(rows) > args["limit"]
        return {"events": [event_json(e) for e in page], "next": encode_cursor(page[-1].id) if more else None}


@blp.route("/<string:learner>")
class Learner(MethodView):
    @needs("events:write")
    @blp.response(200, ErasureSchema)
    @blp.problems(401, 403, 404, 429, 503)
    def delete(self, learner):
        """Erase everything stored about a learner of this platform"""
        principal = authorized()
        if not principal.may_act_for(learner):
            raise _not_found(learner)
        erased = erase(principal.platform_id, learner, sessions=principal.learner == learner)
        if erased is None and principal.learner != learner:
            raise _not_found(learner)
        return {"learner": learner, "erased": erased or {}, "replays": ERASURE_POLICY}


def erase(platform_id: int, learner: str, sessions: bool = True) -> dict[str, int] | None:
    """`erase_everywhere` with this app's database, stores and sessions."""
    app = current_app
    return erase_everywhere(
        app.extensions["db"],
        store_of(app),
        app.extensions["session_cache"],
        app.permanent_session_lifetime,
        platform_id,
        learner,
        sessions,
    )


def encode_cursor(row_id: int) -> str:
    return cursors.encode(f"e{row_id}")


def decode_cursor(cursor: str | None) -> int:
    if cursor is None:
        return 0
    text = cursors.decode(cursor)
    if not text.startswith("e"):
        raise cursors.invalid()
    return cursors.row_id(text[1:])
