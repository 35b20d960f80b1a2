"""The one edge every request passes: a WSGI middleware in front of Flask that, once per request,
gives it an id, refuses a URL with control characters, finds its route, identifies its caller
(caller.py), counts its rate limits (limits.py), reads its JSON body within its deadlines
(body.py), charges its compute budget, then lets its resource's fast handler answer or hands it
to Flask, and adds the headers, CORS, metrics and the log line for both.

Resources declare what the edge needs beside their views: `@costs(fn)` (the cells a request
charges), `@answer_fast(handler)` (answers the bodies it is sure of without Flask; None lets
Flask and marshmallow answer, in their words), `@rate_limit(...)` (limits.py). Flask views read
the caller, the parsed body and the counted limit from the environ (api/auth.py, api/smorest.py).
`edge(app).after(hook)` adds a header to every answer, fast or not.
"""

from __future__ import annotations

import io
import logging
import os
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from flask import Flask
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as SQLAlchemyTimeout
from werkzeug.exceptions import HTTPException
from werkzeug.http import HTTP_STATUS_CODES, parse_accept_header
from werkzeug.wrappers import Request

from .. import i18n
from ..db import DatabaseUnavailable
from ..observability import REQUESTS, UNAVAILABLE
from ..server.penalties import EARLY_BYTES
from . import caller as callers
from .body import has_body, is_json, parse_json, read_body, refuse_control_characters
from .caller import CALLER, Caller
from .limits import Limits, rate_limit
from .problems import PROBLEM_MIMETYPE, Problem, database_problem, unauthorized

__all__ = ["Answer", "EdgeRequest", "answer_fast", "costs", "edge", "init_app", "rate_limit"]

REQUEST_ID = "workbench.request_id"
JSON = "workbench.json"  # the parsed body (absent: none was read, or it is left raw for the background)
RAW = "workbench.raw"  # the body's bytes
COUNTED = "workbench.counted"  # the X-RateLimit headers of the counted request
RECEIPT = "workbench.charged"  # what the compute budgets were charged for this request
CELLS = (
    "workbench.cells"  # the request's cost in cells, charged or not (limits off): the heavy ones go to the background
)
ROUTE = "workbench.route"  # the matched rule, for metrics (never the path: paths carry learner ids)
REQUEST_ID_FORM = re.compile(r"\A[A-Za-z0-9._-]{8,64}\Z")
COUNTED_PREFIXES = ("/api/v1/", "/lti/")
BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
NO_BODY_METHODS = frozenset({"GET", "HEAD", "DELETE", "OPTIONS"})  # an empty body here is no body, whatever its type
EXPOSED = "Retry-After, Location, X-Request-Id"
MATCHES_KEPT = 4096  # (method, path) matches remembered, then forgotten all at once
log = logging.getLogger("service.requests")


@dataclass(frozen=True)
class Answer:
    """A fast handler's whole answer: a status, a body (bytes, or an open file sent by the server)."""

    status: int
    body: bytes | BinaryIO
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()


@dataclass
class EdgeRequest:
    """What a route's cost and fast handler see."""

    app: Flask
    environ: dict[str, Any]
    caller: Caller
    raw: bytes | None  # the body's bytes (None: no body was read here)
    view_args: dict[str, Any] = field(default_factory=dict)  # the route's path arguments
    data: Any = None  # the parsed JSON, when parsed (`parsed`)
    parsed: bool = False

    @property
    def accept(self) -> Any:
        return parse_accept_header(self.environ.get("HTTP_ACCEPT"))

    def parse(self) -> Any:
        """The body as strict JSON, parsed now where the edge kept it raw: a route whose view reads it
        in this thread anyway measures it whole, once, for every reader after."""
        if not self.parsed:
            self.data, self.parsed = parse_json(self.raw or b""), True
            self.environ[JSON] = self.data
        return self.data


def answer_fast(handler: Callable[[EdgeRequest], Answer | None]) -> Callable:
    """A view's fast handler: answers what it is sure of, returns None to let the view answer."""

    def decorator(func: Callable) -> Callable:
        func.edge_fast = handler  # type: ignore[attr-defined]
        return func

    return decorator


def costs(measure: Callable[[EdgeRequest], int | None]) -> Callable:
    """The cells a request to this view charges to the compute budgets (None: nothing, or the
    view finds out: a body too large to parse at the edge measures itself)."""

    def decorator(func: Callable) -> Callable:
        func.edge_cost = measure  # type: ignore[attr-defined]
        return func

    return decorator


@dataclass(frozen=True)
class _Route:
    rule: str
    endpoint: str
    fast: Callable[[EdgeRequest], Answer | None] | None = None
    cost: Callable[[EdgeRequest], int | None] | None = None
    limits: tuple[str, ...] = ()
    credentials: dict[str, bool] | None = None  # the view needs a caller (`@needs`): judged before any body


@dataclass
class Edge:
    app: Flask
    flask: Callable[..., Iterable[bytes]]
    limits: Limits
    hooks: list[Callable[[dict[str, Any], list[tuple[str, str]]], None]] = field(default_factory=list)
    routes: dict[tuple[str, str], _Route | None] = field(default_factory=dict)
    fixed: list[tuple[str, str]] = field(default_factory=list)
    # (method, path) -> what it matched: paths repeat (the workbench posts one path all day), and
    # Werkzeug's matcher costs tens of microseconds; bounded, since paths with ids do not repeat
    matched: dict[tuple[str, str], tuple[_Route, dict[str, Any]]] = field(default_factory=dict)
    timers: dict[tuple[str, str, int], Any] = field(default_factory=dict)  # the metric's labelled children
    use_fast: bool = True  # tests turn it off to ask the views for the same answers

    def after(self, hook: Callable[[dict[str, Any], list[tuple[str, str]]], None]) -> None:
        """`hook(environ, headers)` runs on every answer's headers, fast or Flask's."""
        self.hooks.append(hook)

    def limit(self, endpoint: str, method: str, *limits: str) -> None:
        """Add request limits to a route by its endpoint name (as `@rate_limit` on its view)."""
        self.app.extensions["edge_extra_limits"].setdefault((endpoint, method), []).extend(limits)
        self.routes.clear()
        self.matched.clear()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        started = time.perf_counter()
        incoming = environ.get("HTTP_X_REQUEST_ID", "")
        environ[REQUEST_ID] = incoming if REQUEST_ID_FORM.match(incoming) else os.urandom(16).hex()
        try:
            answer = self._handle(environ)
        except Problem as refused:
            answer = _problem_answer(refused, environ)
        except (DatabaseUnavailable, SQLAlchemyTimeout, DBAPIError) as error:  # the caller's identity, or a write
            unavailable = database_problem(error)
            if unavailable is None:
                raise
            answer = _problem_answer(unavailable, environ)
        if answer is None:
            return self._through_flask(environ, start_response, started)
        headers = [("Content-Type", answer.content_type), *answer.headers]
        if isinstance(answer.body, bytes):
            headers.append(("Content-Length", str(len(answer.body))))
        headers = self._finish(environ, answer.status, headers + [("Vary", "Cookie")])
        start_response(f"{answer.status} {_reason(answer.status)}", headers)
        self._record(environ, answer.status, started)
        if isinstance(answer.body, bytes):
            return [answer.body]
        wrapper = environ.get("wsgi.file_wrapper")
        return wrapper(answer.body) if wrapper else iter(lambda: answer.body.read(65536), b"")  # type: ignore[union-attr]

    def _handle(self, environ: dict[str, Any]) -> Answer | None:
        method, path = environ.get("REQUEST_METHOD", "GET"), environ.get("PATH_INFO", "")
        route, view_args = self._route(environ, method, path)
        environ[ROUTE] = route.rule if route else "unmatched"
        refuse_control_characters(environ)
        if path.startswith("/api/v1/") and environ.get("HTTP_ORIGIN") and method == "OPTIONS":
            return self._preflight(environ)
        counted = path.startswith(COUNTED_PREFIXES) and method != "OPTIONS"
        who = callers.identify(self.app, environ) if counted else Caller("", "")
        environ[CALLER] = who
        if counted:
            environ[COUNTED] = self.limits.hit(who, route.endpoint if route else path, route.limits if route else ())
        if who.refused and route is not None and route.credentials is not None:
            raise unauthorized(who.refused, basic=route.credentials.get("basic", False))  # before any body is read
        if route is None or method not in BODY_METHODS or not is_json(environ.get("CONTENT_TYPE")):
            return None
        if method in NO_BODY_METHODS and not has_body(environ):
            return None  # a client that sets the header on every request: no body, nothing to parse
        if route.cost is not None and _length(environ) >= EARLY_BYTES:
            self.limits.refuse_early(who)  # a network past its share: its large bodies before any parsing
        request = self._read(environ, who, view_args)
        with self.app.app_context():  # the settings, the database, the models: as a view sees them
            cells = environ[CELLS] = route.cost(request) if route.cost else None
            if cells:
                environ[RECEIPT] = self.limits.charge(who, cells)
            return route.fast(request) if route.fast and self.use_fast else None

    def _read(self, environ: dict[str, Any], who: Caller, view_args: dict[str, Any]) -> EdgeRequest:
        """The body, read once: kept raw when it is too large to parse here (the background process
        parses it: heavy traces), else parsed as strict JSON for every reader after."""
        settings = self.app.extensions["settings"]
        raw = read_body(environ, settings.max_content_length, settings.body_seconds, settings.client_stall_seconds)
        environ[RAW] = raw
        environ["wsgi.input"] = io.BytesIO(raw)  # Flask reads what was read, if it reads
        environ["CONTENT_LENGTH"] = str(len(raw))
        request = EdgeRequest(self.app, environ, who, raw, view_args)
        if len(raw) < settings.background_parse_bytes:
            request.data, request.parsed = parse_json(raw), True
            environ[JSON] = request.data
        return request

    def _route(self, environ: dict[str, Any], method: str, path: str) -> tuple[_Route | None, dict[str, Any]]:
        known = self.matched.get((method, path))
        if known is not None:
            return known[0], dict(known[1])
        try:
            rule, view_args = self.app.url_map.bind_to_environ(environ).match(return_rule=True)
        except HTTPException:  # 404, 405, a redirect: Flask answers it
            return None, {}
        key = (rule.endpoint, method)
        if key not in self.routes:
            self.routes[key] = self._declared(rule.rule, rule.endpoint, method)
        route = self.routes[key]
        if route is not None:
            if len(self.matched) >= MATCHES_KEPT:
                self.matched.clear()
            self.matched[(method, path)] = (route, dict(view_args))
        return route, dict(view_args)

    def _declared(self, rule: str, endpoint: str, method: str) -> _Route:
        """What the view (a function, or a MethodView's method) declares for the edge."""
        view = self.app.view_functions.get(endpoint)
        func = getattr(getattr(view, "view_class", None), method.lower(), view)
        extra = tuple(self.app.extensions["edge_extra_limits"].get((endpoint, method), ()))
        return _Route(
            rule,
            endpoint,
            getattr(func, "edge_fast", None),
            getattr(func, "edge_cost", None),
            (*getattr(func, "edge_limits", ()), *extra),
            getattr(func, "edge_credentials", None),
        )

    def _preflight(self, environ: dict[str, Any]) -> Answer:
        origin = environ["HTTP_ORIGIN"]
        if origin not in self.app.extensions["settings"].cors_origins:
            return Answer(200, b"", "text/plain")
        return Answer(
            200,
            b"",
            "text/plain",
            (
                ("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS"),
                ("Access-Control-Allow-Headers", environ.get("HTTP_ACCESS_CONTROL_REQUEST_HEADERS", "Content-Type")),
                ("Access-Control-Max-Age", "600"),
            ),
        )

    def _through_flask(self, environ: dict[str, Any], start_response: Callable[..., Any], started: float):
        def starting(status: str, headers: list[tuple[str, str]], exc_info: Any = None):
            environ["workbench.status"] = code = int(status.split(" ", 1)[0])
            return start_response(status, self._finish(environ, code, headers), exc_info)

        try:
            return self.flask(environ, starting)
        finally:
            self._record(environ, environ.get("workbench.status", 500), started)

    def _finish(self, environ: dict[str, Any], status: int, headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """Every answer's headers: the request id, the counted limit, CORS, the security headers a
        view did not set itself, Retry-After only where it means something, then the hooks."""
        present = {name.lower() for name, _ in headers}
        headers = [h for h in headers if status in (429, 503) or h[0].lower() != "retry-after"]
        headers.append(("X-Request-Id", environ[REQUEST_ID]))
        headers += [h for h in environ.get(COUNTED, ()) if h[0].lower() not in present]
        origin = environ.get("HTTP_ORIGIN")
        if (
            origin
            and environ.get("PATH_INFO", "").startswith("/api/v1/")
            and origin in self.app.extensions["settings"].cors_origins
        ):
            headers += [
                ("Access-Control-Allow-Origin", origin),
                ("Access-Control-Expose-Headers", EXPOSED),
                ("Vary", "Origin"),
            ]
        headers += [h for h in self.fixed if h[0].lower() not in present]
        for hook in self.hooks:
            hook(environ, headers)
        return headers

    def _record(self, environ: dict[str, Any], status: int, started: float) -> None:
        """Metrics by route rule and the request's log line (JSON, without learner ids or keys);
        a request refused after it was charged (a 5xx) gets its cells back."""
        receipt = environ.get(RECEIPT)
        if receipt is not None and status >= 500:
            self.limits.refund(receipt)
        duration = time.perf_counter() - started
        method, route = environ.get("REQUEST_METHOD", "GET"), environ.get(ROUTE, "unmatched")
        timer = self.timers.get((route, method, status))
        if timer is None:
            timer = self.timers[(route, method, status)] = REQUESTS.labels(route, method, str(status))
        timer.observe(duration)
        if status == 503:
            UNAVAILABLE.inc()
        if log.isEnabledFor(logging.INFO):
            log.info(
                "request",
                extra={
                    "request_id": environ[REQUEST_ID],
                    "endpoint": route,
                    "method": method,
                    "status": status,
                    "duration_ms": round(duration * 1000, 2),
                },
            )


def _problem_answer(problem: Problem, environ: dict[str, Any]) -> Answer:
    """The edge's refusal, before Flask: in the language the request would be answered in."""
    locale = i18n.choose(Request(environ))
    return Answer(problem.status, problem.body_bytes(locale), PROBLEM_MIMETYPE, tuple(problem.headers.items()))


def _length(environ: dict[str, Any]) -> int:
    try:
        return int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return 0


def _reason(status: int) -> str:
    return HTTP_STATUS_CODES.get(status, "Unknown").upper()


def edge(app: Flask) -> Edge:
    return app.extensions["edge"]


def init_app(app: Flask) -> Edge:
    """In front of Flask's own WSGI app (and behind ProxyFix, which create_app adds last)."""
    from ..observability import security_header_values

    settings = app.extensions["settings"]
    callers.init_app(app)
    app.extensions["edge_extra_limits"] = {}
    front = Edge(app, app.wsgi_app, Limits(settings), fixed=security_header_values(settings))
    app.extensions["edge"] = app.extensions["limits"] = front
    app.extensions["limits"] = front.limits
    app.wsgi_app = front  # type: ignore[method-assign]  # Flask's documented way to wrap the WSGI app
    return front
