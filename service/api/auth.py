"""What a view knows of its caller: the principal the edge identified (service/edge/caller.py),
checked for the scope the view needs. A platform reads and writes only its own learners; a
browser learner only themself. Nothing here reads the database or identifies anyone again.
"""

from __future__ import annotations

from flask import request

from ..edge.caller import CALLER, Caller
from ..edge.problems import Problem
from ..identity import Principal

UNAUTHORIZED_HEADERS = {"WWW-Authenticate": 'Bearer realm="attention-workbench"'}


def unauthorized(detail: str) -> Problem:
    return Problem(401, detail, headers=UNAUTHORIZED_HEADERS, slug="unauthorized")


def caller() -> Caller:
    """The caller the edge identified for this request (anonymous outside /api/v1 and /lti)."""
    return request.environ.get(CALLER) or Caller("", "")


def current_principal(scope: str, *, allow_web: bool = True, allow_basic: bool = False) -> Principal:
    """The authenticated caller holding `scope`, or 401/403."""
    who = caller()
    if who.refused:
        raise unauthorized(who.refused)
    if who.basic and not allow_basic:
        raise unauthorized("send the API key as 'Authorization: Bearer <key>'")
    principal = who.principal
    if principal is None or (principal.learner is not None and not allow_web):
        raise unauthorized(
            "authentication required: send 'Authorization: Bearer <key>'"
            + (", or start a browser session with POST /api/v1/session" if allow_web else "")
        )
    if scope not in principal.scopes:
        raise Problem(403, f"this key lacks the {scope!r} scope", slug="forbidden")
    return principal


def browser_learner() -> str | None:
    """The browser session's learner (not logged out), if the request carries one."""
    who = caller()
    return who.learner if "HTTP_AUTHORIZATION" not in request.environ else _session_learner(who)


def _session_learner(who: Caller) -> str | None:
    from flask import current_app

    from ..edge.caller import session_learner

    return session_learner(current_app, who.session)


def optional_principal(scope: str) -> Principal | None:
    """The caller if they identified themselves (key or browser session), else None."""
    if "HTTP_AUTHORIZATION" not in request.environ and not browser_learner():
        return None
    return current_principal(scope)
