"""Browser sessions of the built-in front end: a pseudonymous learner id in a signed cookie."""

from __future__ import annotations

from flask import current_app
from flask import session as cookie
from flask.views import MethodView

from ..identity import WEB_PLATFORM, new_learner_id
from .auth import web_platform_id
from .problems import Problem
from .schemas.learners import SessionSchema
from .smorest import Blueprint

blp = Blueprint(
    "session",
    __name__,
    url_prefix="/api/v1/session",
    description="The browser learner's pseudonymous identity (signed, HttpOnly cookie).",
)


@blp.route("")
class BrowserSession(MethodView):
    @blp.response(201, SessionSchema, description="A new learner id (or the existing one)")
    @blp.problems(429, 503)
    def post(self):
        """Start (or resume) a browser learner session"""
        web_platform_id()  # the web platform exists before any of its learners writes
        status = 200
        if not cookie.get("learner"):
            cookie["learner"] = new_learner_id()
            cookie.permanent = True
            status = 201
        return current_app.response_class(
            current_app.json.dumps({"learner": cookie["learner"], "platform": WEB_PLATFORM}),
            status=status,
            mimetype="application/json",
        )

    @blp.response(200, SessionSchema)
    @blp.problems(404)
    def get(self):
        """The current browser learner"""
        if not cookie.get("learner"):
            raise Problem(404, "no browser session; POST /api/v1/session starts one", slug="not-found")
        return {"learner": cookie["learner"], "platform": WEB_PLATFORM}

    @blp.response(204)
    def delete(self):
        """Forget the session cookie (the learner's data stays; DELETE /learners/{id} erases it)"""
        cookie.clear()
        return None
