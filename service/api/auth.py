"""What a view knows of its caller: the principal the edge identified (service/edge/caller.py),
checked for the scope the view needs. A platform reads and writes only its own learners; a
browser learner only themself. Nothing here reads the database or identifies anyone again.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from flask import request

from ..edge.caller import CALLER, Caller, browser_learner
from ..edge.problems import Problem, unauthorized
from ..identity import Principal

PRINCIPAL = "workbench.principal"  # the caller `needs` checked, for the view
# The OpenAPI security schemes (registered in api/__init__.py); `needs` names them per operation.
SCHEMES = {
    "apiKey": {
        "type": "http",
        "scheme": "bearer",
        "description": "A platform's API key, made with `workbench keys create --platform ID --scopes ...`, sent as "
        "`Authorization: Bearer <key>`. A key holds scopes (events:write, progress:read, analytics:read); "
        "each operation names the one it needs. A key reads and writes its own platform's learners only.",
    },
    "browserSession": {
        "type": "apiKey",
        "in": "cookie",
        "name": "workbench_session",
        "description": "A browser learner's session cookie (POST /api/v1/session): it acts for that one learner, "
        "with the events:write and progress:read scopes.",
    },
    "xapiBasic": {
        "type": "http",
        "scheme": "basic",
        "description": "For LRS clients that speak only Basic: the API key as the password (or as the user name).",
    },
}


def needs(scope: str, *, web: bool = True, basic: bool = False, optional: bool = False) -> Callable:
    """A view's caller, checked before its arguments are read (an unknown key is 401 whatever the
    body holds) and documented as the operation's `security` with the scope it needs. Put it
    above `@blp.arguments`; the view reads the caller with `authorized()`."""
    schemes: list[dict[str, Any]] = [{"apiKey": []}] + [{"browserSession": []}] * web
    schemes += [{"xapiBasic": []}] * basic + [{}] * optional  # {}: no credentials at all
    ways = ["an API key"] + ["a browser session"] * web + ["Basic with the key"] * basic
    said = f"Needs the `{scope}` scope ({', '.join(ways)})" + (
        "; anonymous callers may call it too." if optional else "."
    )

    def decorator(view: Callable) -> Callable:
        @functools.wraps(view)
        def checked(*args: Any, **kwargs: Any) -> Any:
            who = optional_principal(scope) if optional else current_principal(scope, allow_web=web, allow_basic=basic)
            request.environ[PRINCIPAL] = who
            return view(*args, **kwargs)

        checked.__doc__ = f"{(view.__doc__ or '').rstrip()}\n\n{said}"
        checked.edge_credentials = {"basic": basic, "optional": optional}  # type: ignore[attr-defined]  # the edge judges them first
        checked._apidoc = {  # type: ignore[attr-defined]
            **getattr(view, "_apidoc", {}),
            "manual_doc": {
                **getattr(view, "_apidoc", {}).get("manual_doc", {}),
                "security": schemes,
                "x-scopes": [scope],
            },
        }
        return checked

    return decorator


def authorized() -> Any:
    """The caller `needs` checked for this request (a Principal, or None where anonymous may call)."""
    return request.environ[PRINCIPAL]


def caller() -> Caller:
    """The caller the edge identified for this request (anonymous outside /api/v1 and /lti)."""
    return request.environ.get(CALLER) or Caller("", "")


def current_principal(scope: str, *, allow_web: bool = True, allow_basic: bool = False) -> Principal:
    """The authenticated caller holding `scope`, or 401/403."""
    who = caller()
    if who.refused:
        raise unauthorized(who.refused, basic=allow_basic)
    if who.basic and not allow_basic:
        raise unauthorized("send the API key as 'Authorization: Bearer <key>'")
    principal = who.principal
    if principal is None or (principal.learner is not None and not allow_web):
        raise unauthorized(
            "authentication required: send 'Authorization: Bearer <key>'"
            + (", or start a browser session with POST /api/v1/session" if allow_web else "")
            + (", or Basic with the key as the password" if allow_basic else ""),
            basic=allow_basic,
        )
    if scope not in principal.scopes:
        raise Problem(403, f"this key lacks the {scope!r} scope", slug="forbidden")
    return principal


def optional_principal(scope: str) -> Principal | None:
    """The caller if they identified themselves (key or browser session), else None."""
    if "HTTP_AUTHORIZATION" not in request.environ and not browser_learner():
        return None
    return current_principal(scope)
