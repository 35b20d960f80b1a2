"""The lean path: `POST /api/v1/attention` with a small, plainly valid JSON body, answered by a
WSGI handler in front of Flask instead of Flask's request machinery (request context, routing,
hooks, webargs, marshmallow): the workbench's request at close to a trivial endpoint's rate.

It keeps everything the full path promises: the same body bytes (traces.trace_body and the same
encoder), the same headers (request id, security headers, Vary, the refreshed session cookie,
X-RateLimit-*), the same rate limit counted in the same store, the same metrics and log line.
Whatever it is not sure of goes to the full path untouched, which answers it as it always did:
another route, a query string, a body that is not small strict JSON, a field or value it does
not check here, a caller only the database knows, a refusing rate limit, a cross-origin call
when CORS is configured. So every error, and every problem+json, is the full path's own.
tests/api/test_lean.py holds the two paths to the same answers.
"""

from __future__ import annotations

import io
import logging
import os
import time
from collections.abc import Callable, Iterable
from typing import Any

from flask import Flask
from marshmallow import ValidationError

from ..compute import FAILURE_MODES
from ..observability import REQUEST_ID, REQUESTS, security_header_values
from .json_codec import InvalidJSON, dumps_bytes, loads_strict
from .lean_identity import caller, hit_rate_limit
from .schemas.fields import parse_matrix
from .slow_clients import body_deadline
from .traces import trace_body

PATH = "/api/v1/attention"
MAX_BYTES = 16384  # the workbench sends a few hundred
FIELDS = frozenset({"tokens", "heads", "causal", "failure_mode"})  # what the workbench sends
JSON_TYPES = frozenset({"application/json", "application/json; charset=utf-8", "application/json;charset=utf-8"})
ACCEPTS = frozenset({None, "", "*/*", "application/json"})

log = logging.getLogger("service.requests")  # the full path's request log (observability.init_app)

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class LeanAttention:
    """WSGI middleware: the lean path for what it is sure of, `full` (Flask) for the rest."""

    def __init__(self, app: Flask, full: WSGIApp):
        self.app, self.full = app, full
        self.settings = app.extensions["settings"]
        self.fixed = [*security_header_values(self.settings), ("Vary", "Cookie")]
        self.timer = REQUESTS.labels(PATH, "POST", "200")

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if (
            environ.get("PATH_INFO") != PATH
            or environ.get("REQUEST_METHOD") != "POST"
            or environ.get("QUERY_STRING")
            or not self._plain(environ)
        ):
            return self.full(environ, start_response)
        started = time.perf_counter()
        raw = self._read(environ)
        try:
            answer = None if raw is None else self._answer(environ, raw)
        except Exception:  # a bug here must not cost the request: the full path answers it
            log.exception("the lean path failed; the full path answers")
            answer = None
        if answer is None:
            environ["wsgi.input"] = io.BytesIO(raw or b"")  # the full path reads what was read
            return self.full(environ, start_response)
        body, headers = answer
        request_id = environ.get("HTTP_X_REQUEST_ID", "")
        if not REQUEST_ID.match(request_id):
            request_id = os.urandom(16).hex()  # as uuid4().hex: 32 hex digits, a quarter of the time
        start_response(
            "200 OK",
            [
                ("Content-Type", "application/json"),
                ("Content-Length", str(len(body))),
                *headers,
                ("X-Request-Id", request_id),
                *self.fixed,
            ],
        )
        self._record(request_id, started)
        return [body]

    def _plain(self, environ: dict[str, Any]) -> bool:
        """A small JSON body of known length, answered in JSON, from the same origin (or any when
        CORS is off: then no origin gets CORS headers)."""
        length = environ.get("CONTENT_LENGTH") or ""
        return (
            environ.get("CONTENT_TYPE") in JSON_TYPES
            and length.isdigit()
            and 0 < int(length) <= min(MAX_BYTES, self.settings.max_content_length)
            and "HTTP_TRANSFER_ENCODING" not in environ
            and environ.get("HTTP_ACCEPT") in ACCEPTS
            and not (self.settings.cors_origins and "HTTP_ORIGIN" in environ)
        )

    def _read(self, environ: dict[str, Any]) -> bytes | None:
        """The body, within the same stall and arrival deadlines as the full path; None when it
        did not arrive whole (the full path then answers the 408 or 400 with what came)."""
        sock = environ.get("gunicorn.socket")
        if sock is not None:
            sock.settimeout(self.settings.client_stall_seconds)
        expected = int(environ["CONTENT_LENGTH"])
        try:
            with body_deadline(self.settings.body_seconds, sock) as late:
                raw = environ["wsgi.input"].read(expected)
                return raw if len(raw) == expected and not late() else None
        except OSError:
            return None

    def _answer(self, environ: dict[str, Any], raw: bytes) -> tuple[bytes, list[tuple[str, str]]] | None:
        args = self._arguments(raw)
        if args is None:
            return None
        who = caller(self.app, environ)
        if who is None:
            return None
        try:
            body = dumps_bytes(trace_body(args, args.get("failure_mode")))
        except Exception:  # noqa: BLE001 - refused or failed: the full path answers it, in its words
            return None
        limit_headers = hit_rate_limit(self.app, who)  # counted once: only an answer that is sent
        if limit_headers is None:
            return None
        cookie = [("Set-Cookie", who.set_cookie)] if who.set_cookie else []
        return body, [*limit_headers, *cookie]

    def _arguments(self, raw: bytes) -> dict[str, Any] | None:
        """The arguments AttentionRequestSchema would load, for bodies this path is sure of
        (within every cap strict_input.check_compute_caps checks)."""
        try:
            data = loads_strict(raw)
        except InvalidJSON:
            return None
        if not isinstance(data, dict) or not data.keys() <= FIELDS:
            return None
        heads, causal, mode = data.get("heads"), data.get("causal", True), data.get("failure_mode")
        try:
            tokens = parse_matrix(data.get("tokens"))
        except ValidationError:
            return None
        n, d_model = tokens.shape
        caps = self.settings
        if (
            n > caps.max_tokens
            or d_model > caps.max_d_model
            or type(heads) is not int
            or not 1 <= heads <= caps.max_heads
            or heads * n * n > caps.max_score_cells
            or type(causal) is not bool
            or not (mode is None or (type(mode) is str and mode in FAILURE_MODES))
        ):
            return None
        cells = heads * n * n + n * d_model  # budgets.cost
        if cells >= min(self.settings.compute_free_cells, self.settings.heavy_compute_cells):
            return None  # charged to a budget, or computed in the background process: the full path
        return {"tokens": tokens, "heads": heads, "causal": causal, "failure_mode": mode}

    def _record(self, request_id: str, started: float) -> None:
        """The full path's metrics and log line (observability.init_app)."""
        duration = time.perf_counter() - started
        self.timer.observe(duration)
        if log.isEnabledFor(logging.INFO):
            log.info(
                "request",
                extra={
                    "request_id": request_id,
                    "endpoint": PATH,
                    "method": "POST",
                    "status": 200,
                    "duration_ms": round(duration * 1000, 2),
                },
            )


def init_app(app: Flask) -> None:
    """In front of Flask's own WSGI app (and behind ProxyFix, which create_app adds last)."""
    app.wsgi_app = LeanAttention(app, app.wsgi_app)  # type: ignore[method-assign]
