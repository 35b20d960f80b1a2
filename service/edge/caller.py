"""Who is calling, found once per request at the edge: a platform's API key (Bearer, or Basic
for xAPI clients), a browser learner's signed session, or an anonymous address. From what this
worker already knows (a cache of verified keys and of logged-out sessions), else one database
read. Views read the answer from the environ (api/auth.py); nothing identifies a caller twice.

Rate limits count per verified key, per browser learner, else per address: never by unverified
input, so a made-up key counts against its sender's address and knowing another platform's key
prefix does not spend that platform's budget.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from flask import Flask
from flask.sessions import SecureCookieSessionInterface
from itsdangerous import BadSignature
from werkzeug.http import parse_cookie

from ..db import sessions as sessions_db
from ..db.platforms import authenticate, ensure_platform
from ..identity import WEB_PLATFORM, WEB_SCOPES, Principal, parse_token

CALLER = "workbench.caller"  # the environ key views read (api/auth.py)


@dataclass(frozen=True)
class Caller:
    rate_key: str  # "key:<prefix>", "learner:<hash>", "address:<ip>": whom limits count against
    limit: str  # the request limit that applies (settings.ratelimit_key or ratelimit_learner)
    principal: Principal | None = None  # a verified key's, or a browser learner's
    refused: str | None = None  # what is wrong with the credentials sent (a view that needs them says so)
    basic: bool = False  # the key came as HTTP Basic (only xAPI's statements accept that)
    session: dict[str, Any] = field(default_factory=dict)  # the signed cookie's contents, read only
    address: str = ""  # "address:<ip>": the network address, whoever the caller is

    @property
    def anonymous(self) -> bool:
        """No credentials sent at all: no Authorization, no session (limits count the address)."""
        return self.principal is None and not self.session and self.refused is None and self.rate_key == self.address

    @property
    def learner(self) -> str | None:
        """The browser learner this request acts for, if any."""
        return self.principal.learner if self.principal is not None else None


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
    """Whom a browser learner's requests count against in the limits' store (no learner ids there)."""
    return hashlib.sha256(learner.encode()).hexdigest()[:16]


def identify(app: Flask, environ: dict[str, Any]) -> Caller:
    """The caller of this request (a database read at most: an uncached key or session)."""
    settings = app.extensions["settings"]
    address = f"address:{environ.get('REMOTE_ADDR') or 'unknown'}"
    session = read_session(app, environ)
    header = environ.get("HTTP_AUTHORIZATION")
    if header is not None:
        token, basic, refused = credentials(header)
        principal = known_key(app, token) if token else None
        if token and principal is None:
            refused = "the API key is unknown or revoked"
        if principal is None or not principal.key_prefix:
            return Caller(
                address, settings.ratelimit_learner, refused=refused, basic=basic, session=session, address=address
            )
        return Caller(
            f"key:{principal.key_prefix}",
            settings.ratelimit_key,
            principal,
            basic=basic,
            session=session,
            address=address,
        )
    learner = session_learner(app, session)
    if not learner:
        return Caller(address, settings.ratelimit_learner, session=session, address=address)
    principal = browser_principal(app, session, learner)
    return Caller(
        f"learner:{learner_rate_id(learner)}", settings.ratelimit_learner, principal, session=session, address=address
    )


def credentials(header: str) -> tuple[str | None, bool, str | None]:
    """(the key sent, whether as Basic, what is wrong with the header)."""
    kind, _, value = header.strip().partition(" ")
    value = value.strip()
    if kind.lower() == "bearer" and value:
        return value, False, None
    if kind.lower() == "basic" and value:
        try:
            user, _, password = base64.b64decode(value, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None, True, "the Basic credentials are not valid base64"
        return password or user, True, None  # the key may be sent as the user name or as the password
    return None, False, "send the API key as 'Authorization: Bearer <key>'"


def known_key(app: Flask, token: str) -> Principal | None:
    """The key's principal; only keys that verified are cached, under a hash of the whole token."""
    if not parse_token(token):
        return None
    cache: TTLCache = app.extensions["key_cache"]
    digest = key_digest(token)
    principal = cache.get(digest)
    if isinstance(principal, Principal):
        return principal
    with app.extensions["db"].read() as conn:  # one round trip, then cached
        found = authenticate(conn, token)
    if found is not None:
        cache.put(digest, found)
    return found


def read_session(app: Flask, environ: dict[str, Any]) -> dict[str, Any]:
    """The signed session cookie's contents ({} without one, or when it does not verify)."""
    header = environ.get("HTTP_COOKIE")
    name = app.config["SESSION_COOKIE_NAME"]
    if not header or name not in header:
        return {}
    value = parse_cookie(header).get(name)
    iface = app.session_interface
    serializer = iface.get_signing_serializer(app) if isinstance(iface, SecureCookieSessionInterface) else None
    if not value or serializer is None:
        return {}
    try:
        data = serializer.loads(value, max_age=int(app.permanent_session_lifetime.total_seconds()))
    except BadSignature:
        return {}
    return data if isinstance(data, dict) else {}


def session_learner(app: Flask, session: dict[str, Any]) -> str | None:
    """The session's learner, unless that session was logged out or the learner erased (refused
    within WORKBENCH_AUTH_CACHE_SECONDS in other workers, at once in this one)."""
    learner, sid = session.get("learner"), session.get("sid")
    if not learner:
        return None
    cache: TTLCache = app.extensions["session_cache"]
    platform_id = session.get("platform_id") if session.get("platform_id") is not None else web_platform_id(app)
    marks = [m for m in (sid, sessions_db.learner_mark(platform_id, learner)) if m]
    known = {m: cache.get(m) for m in marks}
    if any(v is None for v in known.values()):
        with app.extensions["db"].read() as db_session:
            refused = sessions_db.revoked_of(db_session, *marks)
        for m in marks:
            known[m] = m in refused
            cache.put(m, known[m])
    return None if any(known.values()) else learner


def browser_principal(app: Flask, session: dict[str, Any], learner: str) -> Principal:
    """A browser session's learner: of the web platform, or of the LTI platform that launched them
    (service/lti/views.py puts it in the signed cookie)."""
    if session.get("platform_id") is None:
        return Principal(platform_id=web_platform_id(app), platform=WEB_PLATFORM, scopes=WEB_SCOPES, learner=learner)
    return Principal(int(session["platform_id"]), session["platform"], WEB_SCOPES, learner)


def web_platform_id(app: Flask) -> int:
    cached = app.extensions.get("web_platform_id")
    if cached is None:
        with app.extensions["db"].write() as session:
            cached = ensure_platform(session, WEB_PLATFORM).id
        app.extensions["web_platform_id"] = cached
    return cached


def init_app(app: Flask) -> None:
    settings = app.extensions["settings"]
    app.extensions["key_cache"] = TTLCache(settings.auth_cache_seconds)
    app.extensions["session_cache"] = TTLCache(settings.auth_cache_seconds)


def browser_learner() -> str | None:
    """The browser session's learner (not logged out), if this request carries one (for views: the
    API's and LTI's)."""
    from flask import current_app, request

    who = request.environ.get(CALLER) or Caller("", "")
    if "HTTP_AUTHORIZATION" not in request.environ:
        return who.learner
    return session_learner(current_app, who.session)
