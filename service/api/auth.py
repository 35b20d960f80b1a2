"""Who is calling: a platform's Bearer key, or a browser learner's signed session cookie.

A platform reads and writes only its own learners; a browser learner only themself.
Rate limits count per key and per browser learner (per address for anonymous calls).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import threading
import time

from flask import Flask, current_app, g, request
from flask import session as cookie
from flask_limiter import Limiter

from ..db import sessions as sessions_db
from ..db.platforms import authenticate, ensure_platform
from ..identity import WEB_PLATFORM, WEB_SCOPES, Principal, parse_token
from ..observability import RATELIMIT_STORAGE_TROUBLE
from .problems import Problem

UNAUTHORIZED_HEADERS = {"WWW-Authenticate": 'Bearer realm="attention-workbench"'}


def _unauthorized(detail: str) -> Problem:
    return Problem(401, detail, headers=UNAUTHORIZED_HEADERS, slug="unauthorized")


def bearer_token(allow_basic: bool = False) -> str | None:
    header = request.headers.get("Authorization")
    if header is None:
        return None
    kind, _, value = header.strip().partition(" ")
    value = value.strip()
    if kind.lower() == "bearer" and value:
        return value
    if allow_basic and kind.lower() == "basic" and value:
        try:
            user, _, password = base64.b64decode(value, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            raise _unauthorized("the Basic credentials are not valid base64") from None
        return password or user  # the key may be sent as the user name or as the password
    raise _unauthorized("send the API key as 'Authorization: Bearer <key>'")


class TTLCache:
    """What this worker learned recently (verified keys, logged-out sessions), each answer kept for
    `seconds` (WORKBENCH_AUTH_CACHE_SECONDS; 0 turns the cache off), `size` answers at most, the
    oldest dropped first. A revoked key or session is refused everywhere within `seconds`."""

    def __init__(self, seconds: float, size: int = 10_000):
        self.seconds = seconds
        self.size = size
        self._entries: dict[str, tuple[float, object]] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> object | None:
        hit = self._entries.get(key)
        return None if hit is None or hit[0] < time.monotonic() else hit[1]

    def put(self, key: str, value: object, seconds: float | None = None) -> None:
        with self._lock:
            if len(self._entries) >= self.size:
                self._entries.pop(next(iter(self._entries)))
            self._entries[key] = (time.monotonic() + (self.seconds if seconds is None else seconds), value)


def key_digest(token: str) -> str:
    """What the key cache files a verified key under: a hash of the whole token."""
    return hashlib.sha256(token.encode()).hexdigest()


def learner_rate_id(learner: str) -> str:
    """Whom a browser learner's requests count against in the limiter's store (no learner ids there)."""
    return hashlib.sha256(learner.encode()).hexdigest()[:16]


def _known_key_once(token: str) -> Principal | None:
    """`_known_key`, once per request (the rate limiter and the view both ask)."""
    if "known_key" not in g:
        g.known_key = _known_key(token)
    return g.known_key


def _known_key(token: str) -> Principal | None:
    """The key's principal; only keys that verified are cached, under a hash of the whole token."""
    cache: TTLCache = current_app.extensions["key_cache"]
    digest = key_digest(token)
    principal = cache.get(digest)
    if isinstance(principal, Principal):
        return principal
    with current_app.extensions["db"].read() as conn:  # one round trip, then cached
        found = authenticate(conn, token)
    if found is not None:
        cache.put(digest, found)
    return found


def current_principal(scope: str, *, allow_web: bool = True, allow_basic: bool = False) -> Principal:
    """The authenticated caller holding `scope`, or 401/403."""
    token = bearer_token(allow_basic)
    if token is not None:
        principal = _known_key_once(token)
        if principal is None:
            raise _unauthorized("the API key is unknown or revoked")
    elif allow_web and browser_learner():
        principal = browser_principal(cookie["learner"])
    else:
        raise _unauthorized(
            "authentication required: send 'Authorization: Bearer <key>'"
            + (", or start a browser session with POST /api/v1/session" if allow_web else "")
        )
    if scope not in principal.scopes:
        raise Problem(403, f"this key lacks the {scope!r} scope", slug="forbidden")
    g.principal = principal
    return principal


def web_platform_id() -> int:
    cached = current_app.extensions.get("web_platform_id")
    if cached is None:
        with current_app.extensions["db"].write() as session:
            cached = ensure_platform(session, WEB_PLATFORM).id
        current_app.extensions["web_platform_id"] = cached
    return cached


def browser_learner() -> str | None:
    """The browser session's learner: from the signed cookie, unless that session was logged out
    (refused within WORKBENCH_AUTH_CACHE_SECONDS in other workers, at once in this one)."""
    learner = cookie.get("learner")
    sid = cookie.get("sid")
    if not learner or not sid:
        return learner or None  # sessions from before logout could be revoked carry no sid
    if "session_revoked" not in g:
        cache: TTLCache = current_app.extensions["session_cache"]
        revoked = cache.get(sid)
        if revoked is None:
            with current_app.extensions["db"].read() as session:
                revoked = sessions_db.is_revoked(session, sid)
            cache.put(sid, revoked)
        g.session_revoked = bool(revoked)
    return None if g.session_revoked else learner


def browser_principal(learner: str) -> Principal:
    """A browser session's learner: of the web platform, or of the LTI platform that launched them
    (service/lti/views.py puts it in the signed cookie)."""
    if cookie.get("platform_id") is None:
        return Principal(platform_id=web_platform_id(), platform=WEB_PLATFORM, scopes=WEB_SCOPES, learner=learner)
    return Principal(
        platform_id=int(cookie["platform_id"]), platform=cookie["platform"], scopes=WEB_SCOPES, learner=learner
    )


def optional_principal(scope: str) -> Principal | None:
    """The caller if they identified themselves (key or browser session), else None."""
    if request.headers.get("Authorization") is None and not browser_learner():
        return None
    return current_principal(scope)


# -- rate limits ---------------------------------------------------------------------------


def _rate_identity() -> tuple[str, str]:
    """Whom a request counts against: a key that verifies, a signed browser session, else the
    client's address. Never unverified input: a made-up key counts against its sender's address,
    and knowing another platform's key prefix does not spend that platform's budget."""
    header = request.headers.get("Authorization", "")
    kind, _, value = header.partition(" ")
    if kind.lower() == "bearer" and parse_token(value.strip()):
        principal = _known_key_once(value.strip())
        if principal is not None and principal.key_prefix:
            return "key", principal.key_prefix
        return "address", request.remote_addr or "unknown"
    learner = browser_learner()
    if learner:
        return "learner", learner_rate_id(learner)
    return "address", request.remote_addr or "unknown"


def rate_key() -> str:
    kind, ident = _rate_identity()
    return f"{kind}:{ident}"


def rate_limit() -> str:
    settings = current_app.extensions["settings"]
    return settings.ratelimit_key if _rate_identity()[0] == "key" else settings.ratelimit_learner


class _CountStorageTrouble(logging.Handler):
    """Counts flask-limiter's warnings and errors (its storage went away, or an error was swallowed)."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        RATELIMIT_STORAGE_TROUBLE.inc()


def limiter_storage_ok(app: Flask) -> bool:
    """Whether the rate limiter's shared store answers (always true for the in-memory store)."""
    try:
        return bool(app.extensions["limiter"].storage.check())
    except Exception:  # any client error means it does not answer; /readyz reports it, never fails on it
        return False


# The lean path (lean.py) puts its X-RateLimit headers here once it has counted a request: if it
# then leaves the request to Flask after all, the limiter does not count it a second time.
LEAN_COUNTED = "workbench.lean_counted"


def init_limiter(app: Flask) -> Limiter:
    settings = app.extensions["settings"]
    app.extensions["key_cache"] = TTLCache(settings.auth_cache_seconds)
    app.extensions["session_cache"] = TTLCache(settings.auth_cache_seconds)
    limiter = Limiter(
        key_func=rate_key,
        app=app,
        application_limits=[rate_limit],
        storage_uri=settings.ratelimit_storage_uri,
        headers_enabled=True,
        enabled=settings.ratelimit_enabled,
        key_prefix="workbench",
        strategy="moving-window",
        # The shared store (Redis) down must not take the API down: limits continue per worker
        # in memory, a warning is logged and counted, and /readyz says "degraded".
        in_memory_fallback_enabled=True,
        swallow_errors=True,
    )
    logging.getLogger("flask-limiter").addHandler(_CountStorageTrouble())

    @limiter.request_filter
    def _only_the_api() -> bool:  # and LTI's logins and launches, which write to the database
        return (
            not request.path.startswith(("/api/v1/", "/lti/"))
            or request.method == "OPTIONS"
            or LEAN_COUNTED in request.environ  # counted once already, by the lean path
        )

    @app.after_request
    def _lean_counts_headers(response):
        """The X-RateLimit headers of a request the lean path counted, then left to Flask."""
        for name, value in request.environ.get(LEAN_COUNTED, ()):
            response.headers.setdefault(name, value)
        return response

    app.extensions["limiter"] = limiter
    return limiter
