"""Who is calling, for the lean path (lean.py), from what this worker already knows: no database
read, no Flask request context. `None` anywhere means "not sure": the request then takes the
full path, which finds out (and fills the caches the next request reads here).

The answers are those of auth._rate_identity and Flask's cookie sessions, for the cases handled:
no credentials (the client's address), a verified key in the key cache, a browser session of
the web platform (its permanent cookie refreshed, as Flask refreshes it on every response).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from flask import Flask
from flask.sessions import SecureCookieSessionInterface
from itsdangerous import BadSignature
from limits import RateLimitItem, parse
from werkzeug.http import dump_cookie, parse_cookie

from ..identity import WEB_PLATFORM, WEB_SCOPES, Principal, parse_token
from .auth import key_digest, learner_rate_id


@dataclass(frozen=True)
class Caller:
    rate_key: str  # as auth.rate_key: "key:<prefix>", "learner:<hash>", "address:<ip>"
    limit: str  # the rate limit that applies (settings.ratelimit_key or ratelimit_learner)
    set_cookie: str | None  # the refreshed session cookie, when Flask would send one
    principal: Principal | None = None  # as auth.current_principal finds it; None: anonymous


def caller(app: Flask, environ: dict[str, Any], needs_principal: bool) -> Caller | None:
    """Who is calling, or None when only the full path can tell (or must refuse)."""
    settings = app.extensions["settings"]
    session = _session(app, environ)
    if session is None:
        return None
    cookie = _refreshed_cookie(app, session)
    if not app.extensions["limiter"].enabled and not needs_principal:
        return Caller("", "", cookie)  # nothing is counted: who it is does not matter
    authorization = environ.get("HTTP_AUTHORIZATION")
    if authorization is not None:
        principal = _cached_key(app, authorization)
        if principal is None or not principal.key_prefix:
            return None
        return Caller(f"key:{principal.key_prefix}", settings.ratelimit_key, cookie, principal)
    learner = _learner(app, session)
    if learner is None or (needs_principal and not learner):
        return None  # unknown to this worker, or anonymous where the full path answers 401
    if not learner:
        return Caller(f"address:{environ.get('REMOTE_ADDR') or 'unknown'}", settings.ratelimit_learner, cookie)
    web = app.extensions.get("web_platform_id")  # auth.web_platform_id, once the full path looked it up
    if needs_principal and web is None:
        return None
    principal = None if web is None else Principal(web, WEB_PLATFORM, WEB_SCOPES, learner)
    return Caller(f"learner:{learner_rate_id(learner)}", settings.ratelimit_learner, cookie, principal)


def _session(app: Flask, environ: dict[str, Any]) -> dict[str, Any] | None:
    """The signed cookie's contents ({} without one); None for what the lean path leaves to Flask:
    a cookie that does not verify, and sessions launched from an LMS (their cookie attributes
    depend on the scheme, service/lti/__init__.py)."""
    header = environ.get("HTTP_COOKIE")
    name = app.config["SESSION_COOKIE_NAME"]
    if not header or name not in header:
        return {}
    value = parse_cookie(header).get(name)
    if not value:
        return {}
    max_age = int(app.permanent_session_lifetime.total_seconds())
    serializer = _interface(app).get_signing_serializer(app)
    if serializer is None:  # no secret key: Flask has no sessions either
        return None
    try:
        data = serializer.loads(value, max_age=max_age)
    except BadSignature:
        return None
    return None if not isinstance(data, dict) or data.get("lti") else data


def _refreshed_cookie(app: Flask, session: dict[str, Any]) -> str | None:
    """Flask re-sends a permanent session's cookie on every response, with a new expiry."""
    if not session or not session.get("_permanent") or not app.config["SESSION_REFRESH_EACH_REQUEST"]:
        return None
    iface = _interface(app)
    serializer = iface.get_signing_serializer(app)
    assert serializer is not None  # the session verified with it
    return dump_cookie(
        iface.get_cookie_name(app),
        serializer.dumps(dict(session)),
        expires=time.time() + app.permanent_session_lifetime.total_seconds(),
        path=iface.get_cookie_path(app),
        domain=iface.get_cookie_domain(app),
        secure=SecureCookieSessionInterface.get_cookie_secure(iface, app),
        httponly=iface.get_cookie_httponly(app),
        samesite=SecureCookieSessionInterface.get_cookie_samesite(iface, app),
        partitioned=SecureCookieSessionInterface.get_cookie_partitioned(iface, app),
        max_size=app.config["MAX_COOKIE_SIZE"],
    )


def _interface(app: Flask) -> SecureCookieSessionInterface:
    iface = app.session_interface
    assert isinstance(iface, SecureCookieSessionInterface)
    return iface


def _cached_key(app: Flask, authorization: str) -> Principal | None:
    """The principal of a well-formed Bearer key this worker verified recently; else None."""
    kind, _, value = authorization.partition(" ")
    token = value.strip()
    if kind.lower() != "bearer" or not parse_token(token):
        return None
    principal = app.extensions["key_cache"].get(key_digest(token))
    return principal if isinstance(principal, Principal) else None


def _learner(app: Flask, session: dict[str, Any]) -> str | None:
    """The session's learner, "" for none (or a logged-out session), None when only the database knows."""
    learner, sid = session.get("learner"), session.get("sid")
    if not learner or not sid:
        return learner or ""
    revoked = app.extensions["session_cache"].get(sid)
    return None if revoked is None else "" if revoked else learner


_ITEMS: dict[str, RateLimitItem] = {}


def hit_rate_limit(app: Flask, who: Caller) -> list[tuple[str, str]] | None:
    """Count the request as flask-limiter would; its X-RateLimit headers, [] when limits are off,
    None when the limit refuses (the full path then answers the 429)."""
    limiter = app.extensions["limiter"]
    if not limiter.enabled:
        return []
    item = _ITEMS.get(who.limit) or _ITEMS.setdefault(who.limit, parse(who.limit))
    args = (limiter._key_prefix, who.rate_key, "global")  # flask-limiter's application-limit key
    strategy = limiter.limiter  # the in-memory fallback while the shared store is down
    if not strategy.hit(item, *args):
        return None
    reset, remaining = strategy.get_window_stats(item, *args)
    return [
        ("X-RateLimit-Limit", str(item.amount)),
        ("X-RateLimit-Remaining", str(remaining)),
        ("X-RateLimit-Reset", str(int(reset + 1))),
    ]
