"""Browser sessions of the built-in front end, `GET`, `POST` and `DELETE /session`: a pseudonymous
learner id in a signed cookie."""

from __future__ import annotations

import datetime as dt
import secrets
import time

from flask import current_app, request
from flask import session as cookie
from flask.views import MethodView

from ..db import locales
from ..db import sessions as sessions_db
from ..edge.caller import CALLER, Caller, browser_learner, web_platform_id
from ..edge.problems import Problem
from ..i18n import current
from ..identity import WEB_PLATFORM, new_learner_id
from ..text import N_
from .schemas.learners import SessionSchema
from .smorest import Blueprint

blp = Blueprint(
    "session",
    __name__,
    url_prefix="/api/v1/session",
    description="The browser learner's pseudonymous identity (signed, HttpOnly cookie).",
)


def _described() -> dict:
    """The session as the browser may know it: the learner, their platform, and whether they are
    an instructor launched from a course (the dashboard then shows that course: /lti/course)."""
    launched = cookie.get("lti") or {}
    return {
        "learner": cookie["learner"],
        "platform": cookie.get("platform", WEB_PLATFORM),
        "course": bool(launched.get("course")),
    }


def _keep_language() -> None:
    """Remember the language this learner reads in (pages start here), when it changed: their
    progress and the instructors' views show it."""
    locale = current()
    if cookie.get("locale") == locale:
        return
    platform_id = cookie.get("platform_id") or web_platform_id(current_app)
    with current_app.extensions["db"].write() as session:
        locales.keep(session, platform_id, cookie["learner"], locale, dt.datetime.now(dt.UTC))
    cookie["locale"] = locale


ROTATE_SECONDS = 3600  # a resumed session's id older than this is replaced when a page loads


def _rotate() -> None:
    """A new session id for the same learner, the old one revoked: a cookie planted in this
    browser, or copied from it, stops working within the hour (session fixation)."""
    old = cookie["sid"]
    lifetime = current_app.permanent_session_lifetime
    with current_app.extensions["db"].write() as session:
        sessions_db.revoke(session, old, dt.datetime.now(dt.UTC) + lifetime)
    current_app.extensions["session_cache"].put(old, True, seconds=lifetime.total_seconds())
    cookie["sid"] = secrets.token_hex(16)
    cookie["sid_at"] = int(time.time())


def _count_a_new_session() -> None:
    """New sessions are free to make and each is a learner: an address starts only so many an hour
    (WORKBENCH_SESSION_MINT_LIMIT); over it, a 429."""
    who: Caller = request.environ[CALLER]
    current_app.extensions["limits"].hit_once(
        who.address or "address:unknown",
        "new-session",
        current_app.extensions["settings"].session_mint_limit,
        "too many new browser sessions from your network address",
    )


@blp.route("")
class BrowserSession(MethodView):
    @blp.response(201, SessionSchema, description="A new learner id (or the existing one)")
    @blp.problems(429, 503)
    def post(self):
        """Start (or resume) a browser learner session"""
        web_platform_id(current_app)  # the web platform exists before any of its learners writes
        status = 200
        if not browser_learner():  # none yet, or logged out: a new pseudonymous learner
            _count_a_new_session()
            cookie.clear()
            cookie["learner"] = new_learner_id()
            cookie["sid"] = secrets.token_hex(16)
            cookie["sid_at"] = int(time.time())
            cookie.permanent = True
            status = 201
        elif not cookie.get("sid"):
            cookie["sid"] = secrets.token_hex(16)  # an older session becomes one that logging out revokes
            cookie["sid_at"] = int(time.time())
        elif time.time() - cookie.get("sid_at", 0) > ROTATE_SECONDS:
            _rotate()
        _keep_language()
        cookie.modified = True  # renewed (a new expiry) whenever a page starts: pages call this on load
        return current_app.response_class(
            current_app.json.dumps(_described()), status=status, mimetype="application/json"
        )

    @blp.response(200, SessionSchema)
    @blp.problems(404)
    def get(self):
        """The current browser learner"""
        if not browser_learner():
            raise Problem(404, N_("no browser session; POST /api/v1/session starts one"), slug="not-found")
        return _described()

    @blp.response(204)
    @blp.problems(503)
    def delete(self):
        """Log out: the session is revoked on the server and the cookie forgotten (the learner's data
        stays; DELETE /learners/{id} erases it)"""
        sid = cookie.get("sid")
        if sid:
            lifetime = current_app.permanent_session_lifetime
            with current_app.extensions["db"].write() as session:
                sessions_db.revoke(session, sid, dt.datetime.now(dt.UTC) + lifetime)
            current_app.extensions["session_cache"].put(sid, True, seconds=lifetime.total_seconds())
        cookie.clear()
        return None
