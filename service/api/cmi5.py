"""A cmi5 unit's statements (docs/cmi5.md): `POST /cmi5/statements`. The lesson's page, launched by an
LMS, says what it was launched with; the service answers the statements due so far, built from the
learner's own record (service/xapi/cmi5.py). The page sends them to the LMS's store with its token,
which never reaches this service."""

from __future__ import annotations

import datetime as dt

from flask import current_app
from flask.views import MethodView

from ..db.progress import learner_events, learner_progress
from ..edge.problems import Problem
from ..xapi import cmi5
from .auth import authorized, needs
from .schemas.cmi5 import UnitStatementsAnswerSchema, UnitStatementsSchema
from .smorest import Blueprint

blp = Blueprint(
    "cmi5", __name__, url_prefix="/api/v1/cmi5", description="A lesson launched as a cmi5 unit: its statements."
)
SESSION = "7c1de0f5-3a3e-4c55-9a8e-2f4f1f3b6d21"
EXAMPLE = {
    "lesson": "multi-head-attention",
    "learner": "lms-learner-77",
    "actor": {"objectType": "Agent", "account": {"homePage": "https://lms.example", "name": "lms-learner-77"}},
    "registration": "3f1d2c4b-5a69-4e7f-8a9b-0c1d2e3f4a5b",
    "activityId": "https://attention-workbench.example/xapi/lessons/multi-head-attention",
    "session": SESSION,
    "contextTemplate": {
        "contextActivities": {"grouping": [{"id": "https://lms.example/course/7/au/3"}]},
        "extensions": {"https://w3id.org/xapi/cmi5/context/extensions/sessionid": SESSION},
    },
    "launchMode": "Normal",
    "masteryScore": 0.8,
    "moveOn": "CompletedAndPassed",
    "initialized": None,
}
MAX_ALLOWED = 1000  # a session's allowed statements (a lesson's events are a few dozen)


@blp.route("/statements")
class UnitStatements(MethodView):
    @needs("progress:read")
    @blp.arguments(UnitStatementsSchema(), example=EXAMPLE)
    @blp.response(200, UnitStatementsAnswerSchema)
    @blp.problems(401, 403, 404, 422, 429, 503)
    def post(self, body):
        """The statements a launched lesson sends its LMS so far, in order, and its last one"""
        principal = authorized()
        learner = body["learner"] or principal.learner
        if learner is None or not principal.may_act_for(learner):
            raise Problem(404, "no such learner for this platform", slug="not-found")
        lesson = current_app.extensions["lessons"].get(body["lesson"])
        if lesson is None:
            raise Problem(404, f"no lesson {body['lesson']!r}", slug="not-found")
        now = dt.datetime.now(dt.UTC)
        launch = cmi5.Launch(
            actor=body["actor"],
            registration=str(body["registration"]),
            activity_id=body["activityId"],
            session=body["session"],
            context_template=body["contextTemplate"],
            launch_mode=body["launchMode"],
            mastery=body["masteryScore"],
            move_on=body["moveOn"],
            started=min(body["initialized"] or now, now),
        )
        with current_app.extensions["db"].read() as session:
            progress = learner_progress(session, principal.platform_id, learner, [lesson])[0]
            rows = learner_events(session, principal.platform_id, learner, 0, MAX_ALLOWED, lesson.id, launch.started)
        base = current_app.extensions["settings"].activity_base
        return {
            "initialized": launch.started,
            "statements": cmi5.unit_statements(launch, lesson, progress, rows, base),
            "terminated": cmi5.terminated(launch, now),
        }
