"""The lean path: the two requests that come by the thousand, `POST /api/v1/attention` (the
workbench's every edit) and `POST /api/v1/events` (every learner's progress), answered by a WSGI
handler in front of Flask instead of Flask's request machinery (request context, routing,
hooks, webargs, marshmallow) when their JSON body is plainly valid (lean_routes.py).

It keeps everything the full path promises: the same body bytes (the views' own functions and
encoder), the same headers (request id, security headers, Vary, the refreshed session cookie,
X-RateLimit-*), the same rate limit counted in the same store, the same metrics and log line.
Whatever it is not sure of goes to the full path untouched, which answers it as it always did:
another route, a query string, a body that is not strict JSON within the size this path takes,
a field or value it does not check here, a caller only the database knows, a refusing rate
limit, a cross-origin call when CORS is configured. So every error, and every problem+json, is
the full path's own. tests/api/test_lean.py holds the two paths to the same answers.
"""

from __future__ import annotations

import io
import logging
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from flask import Flask

from ..observability import REQUEST_ID, REQUESTS, UNAVAILABLE, security_header_values
from .auth import LEAN_COUNTED
from .json_codec import dumps_bytes
from .lean_identity import Caller, caller, hit_rate_limit
from .problems import PROBLEM_MIMETYPE, Problem
from .slow_clients import body_deadline

JSON_TYPES = frozenset({"application/json", "application/json; charset=utf-8", "application/json;charset=utf-8"})
ACCEPTS = frozenset({None, "", "*/*", "application/json"})

log = logging.getLogger("service.requests")  # the full path's request log (observability.init_app)

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class Route(Protocol):
    max_bytes: int  # larger bodies take the full path
    needs_principal: bool  # the caller must be known (a cached key, a known browser session)

    def answer(self, raw: bytes, who: Caller) -> Answer | None:
        """What the full path would answer, exactly, or None: the full path decides."""


class LeanPath:
    """WSGI middleware: the lean path for what it is sure of, `full` (Flask) for the rest."""

    def __init__(self, app: Flask, full: WSGIApp, routes: dict[str, Route]):
        self.app, self.full, self.routes = app, full, routes
        self.settings = app.extensions["settings"]
        self.fixed = [*security_header_values(self.settings), ("Vary", "Cookie")]
        self.timers: dict[tuple[str, int], Any] = {}

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        route = self.routes.get(path)
        if (
            route is None
            or environ.get("REQUEST_METHOD") != "POST"
            or environ.get("QUERY_STRING")
            or not self._plain(environ, route.max_bytes)
        ):
            return self.full(environ, start_response)
        started = time.perf_counter()
        raw = self._read(environ)
        try:
            answer = None if raw is None else self._answer(environ, raw, route)
        except Exception:  # before anything was written: the full path answers
            log.warning("the lean path could not answer; the full path does", exc_info=True)
            answer = None
        if answer is None:
            if raw is not None:
                environ["wsgi.input"] = io.BytesIO(raw)  # the full path reads what was read
            return self.full(environ, start_response)
        status, body, headers, content_type = answer
        request_id = environ.get("HTTP_X_REQUEST_ID", "")
        if not REQUEST_ID.match(request_id):
            request_id = os.urandom(16).hex()  # as uuid4().hex: 32 hex digits, a quarter of the time
        start_response(
            STATUS_LINES[status],
            [
                ("Content-Type", content_type),
                ("Content-Length", str(len(body))),
                *headers,
                ("X-Request-Id", request_id),
                *self.fixed,
            ],
        )
        self._record(path, status, request_id, started)
        return [body]

    def _plain(self, environ: dict[str, Any], max_bytes: int) -> bool:
        """A small JSON body of known length, answered in JSON, from the same origin (or any when
        CORS is off: then no origin gets CORS headers)."""
        length = environ.get("CONTENT_LENGTH") or ""
        return (
            environ.get("CONTENT_TYPE") in JSON_TYPES
            and length.isdigit()
            and 0 < int(length) <= min(max_bytes, self.settings.max_content_length)
            and "HTTP_TRANSFER_ENCODING" not in environ
            and environ.get("HTTP_ACCEPT") in ACCEPTS
            and not (self.settings.cors_origins and "HTTP_ORIGIN" in environ)
        )

    def _read(self, environ: dict[str, Any]) -> bytes | None:
        """The body, within the same stall and arrival deadlines as the full path; None when it
        did not arrive whole in time: the full path then reads a stream that fails as the socket
        did, and answers its 408."""
        sock = environ.get("gunicorn.socket")
        if sock is not None:
            sock.settimeout(self.settings.client_stall_seconds)
        expected = int(environ["CONTENT_LENGTH"])
        raw = b""
        try:
            with body_deadline(self.settings.body_seconds, sock) as late:
                raw = environ["wsgi.input"].read(expected)
                if len(raw) == expected and not late():
                    return raw
        except OSError:
            pass
        environ["wsgi.input"] = _Cut(raw)
        return None

    def _answer(
        self, environ: dict[str, Any], raw: bytes, route: Route
    ) -> tuple[int, bytes, list[tuple[str, str]], str] | None:
        who = caller(self.app, environ, route.needs_principal)
        if who is None:
            return None
        # Counted first, once: a route that writes must not reach the full path after writing
        # (it would write again and answer a replay); whatever the full path does answer, it
        # answers without counting again (auth.LEAN_COUNTED).
        limit_headers = hit_rate_limit(self.app, who)
        if limit_headers is None:
            return None  # refused: the full path answers the 429
        environ[LEAN_COUNTED] = limit_headers
        answer = route.answer(raw, who)
        if answer is None:
            return None
        cookie = [("Set-Cookie", who.set_cookie)] if who.set_cookie else []
        return answer.status, answer.body, [*answer.headers, *limit_headers, *cookie], answer.content_type

    def _record(self, path: str, status: int, request_id: str, started: float) -> None:
        """The full path's metrics and log line (observability.init_app)."""
        duration = time.perf_counter() - started
        timer = self.timers.get((path, status))
        if timer is None:
            timer = self.timers[(path, status)] = REQUESTS.labels(path, "POST", str(status))
        timer.observe(duration)
        if status == 503:
            UNAVAILABLE.inc()
        if log.isEnabledFor(logging.INFO):
            log.info(
                "request",
                extra={
                    "request_id": request_id,
                    "endpoint": path,
                    "method": "POST",
                    "status": status,
                    "duration_ms": round(duration * 1000, 2),
                },
            )


STATUS_LINES = {200: "200 OK", 201: "201 CREATED", 503: "503 SERVICE UNAVAILABLE"}


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()


def unavailable(problem: Problem) -> Answer:
    """The full path's 503 for a database that did not answer (problems.unavailable), sent from
    here: sending the request on would make it wait for the database a second time."""
    return Answer(problem.status, dumps_bytes(problem.body()), PROBLEM_MIMETYPE, tuple(problem.headers.items()))


class _Cut(io.RawIOBase):
    """A body that stopped arriving: what came, then the timeout the socket gave."""

    def __init__(self, data: bytes):
        self._data = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = self._data.readinto(buffer)
        if not n:
            raise TimeoutError("the request body stopped arriving")
        return n


def init_app(app: Flask, routes: dict[str, Route]) -> None:
    """In front of Flask's own WSGI app (and behind ProxyFix, which create_app adds last)."""
    app.wsgi_app = LeanPath(app, app.wsgi_app, routes)  # type: ignore[method-assign]
