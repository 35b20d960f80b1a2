"""RFC 9457 problem details: every error the service gives has this shape, and every handler
that makes one is here: the edge's own refusals, Flask's and flask-smorest's errors, the
database's, and the errors gunicorn answers itself before the app sees a request."""

from __future__ import annotations

import logging
from typing import Any

import orjson
from flask import Flask, Response
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as SQLAlchemyTimeout
from werkzeug.exceptions import HTTPException
from werkzeug.http import HTTP_STATUS_CODES

from .. import i18n
from ..db import DatabaseUnavailable
from ..text import N_

log = logging.getLogger("service.database")
PROBLEM_MIMETYPE = "application/problem+json"
TYPE_BASE = "https://attention-workbench.invalid/problems/"


# The titles a learner can meet, for the catalogs (the rest are Werkzeug's, in English).
TITLES = [
    N_("Bad Request"),
    N_("Unauthorized"),
    N_("Forbidden"),
    N_("Not Found"),
    N_("Method Not Allowed"),
    N_("Conflict"),
    N_("Gone"),
    N_("Content Too Large"),
    N_("Request Entity Too Large"),
    N_("Unsupported Media Type"),
    N_("Unprocessable Entity"),
    N_("Too Many Requests"),
    N_("Internal Server Error"),
    N_("Service Unavailable"),
    N_("Gateway Timeout"),
]


class Problem(Exception):
    """Raise anywhere in a request to answer with problem+json.

    `title` and `detail` are read in the request's language: a detail written as a catalog msgid
    with `%(name)s` placeholders and its `args` (or a fixed sentence marked `N_`) is translated;
    any other detail stays English. `type` (the slug) never changes with the language."""

    def __init__(
        self,
        status: int,
        detail: str,
        *,
        title: str | None = None,
        errors: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        slug: str | None = None,
        extra: dict[str, Any] | None = None,
        args: dict[str, Any] | None = None,
    ):
        english = detail % args if args else detail
        super().__init__(english)
        self.status = status
        self.message = detail  # the msgid
        self.values = args  # (not `args`: Exception has its own)
        self.detail = english
        self.title = title or HTTP_STATUS_CODES.get(status, "Error")
        self.errors = errors
        self.headers = headers or {}
        self.slug = slug or self.title.lower().replace(" ", "-").replace("'", "")
        self.extra = extra or {}

    def body(self, locale: str | None = None) -> dict[str, Any]:
        locale = locale or i18n.current()
        body: dict[str, Any] = {
            "type": TYPE_BASE + self.slug,
            "title": i18n.translate(self.title, locale),
            "status": self.status,
            "detail": i18n.translate(self.message, locale, self.values),
        }
        if self.errors:
            body["errors"] = self.errors
        body.update(self.extra)
        return body

    def as_data(self) -> dict[str, Any]:
        """Plain data, to cross a process boundary (the large traces' background process)."""
        return {
            "status": self.status,
            "detail": self.message,
            "args": self.values,
            "title": self.title,
            "errors": self.errors,
            "slug": self.slug,
            "extra": self.extra,
        }

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> Problem:
        return cls(
            data["status"],
            data["detail"],
            title=data["title"],
            errors=data["errors"],
            slug=data["slug"],
            extra=data["extra"],
            args=data["args"],
        )

    def body_bytes(self, locale: str | None = None) -> bytes:
        return orjson.dumps(self.body(locale))

    def response(self) -> Response:
        response = Response(self.body_bytes(), status=self.status, mimetype=PROBLEM_MIMETYPE)
        for key, value in self.headers.items():
            response.headers[key] = value
        return response


# -- every failure at the edge becomes problem+json; never a 500 for bad input -------------

RETRY_AFTER_SECONDS = "2"
BUSY = N_("the database is busy or unreachable, try again shortly")


def http_problem(error: HTTPException) -> Problem:
    data = getattr(error, "data", None) or {}
    messages = data.get("messages") or data.get("errors")
    if isinstance(messages, dict) and set(messages) <= {"json", "query", "path", "headers", "form", "files"}:
        # webargs nests by location; flatten "json" (the body) so fields are named directly.
        flat: dict = {}
        for location, fields in messages.items():
            if isinstance(fields, dict):
                flat.update(fields if location == "json" else {f"{location}.{k}": v for k, v in fields.items()})
        messages = flat
    if isinstance(messages, dict):
        messages = flatten_errors(messages)
    status = error.code or 500
    if messages and status == 422 and isinstance(messages, dict):
        return invalid_fields(messages)
    detail = data.get("message") or error.description or error.name
    headers = dict(data.get("headers") or {})
    if status == 405 and hasattr(error, "valid_methods") and error.valid_methods:
        headers["Allow"] = ", ".join(error.valid_methods)
    return Problem(status, detail, errors=messages if isinstance(messages, dict) else None, headers=headers)


PLACES = {"query": "query parameter", "path": "path parameter", "headers": "header", "form": "form field"}


def invalid_fields(messages: dict) -> Problem:
    """422 naming every invalid field (dotted names, as `flatten_errors` gives them), and where it
    was: a query parameter (`query.format`) is named as one, not as a field of a JSON body."""
    parts = []
    body = sorted(str(name) for name in messages if str(name).split(".", 1)[0] not in PLACES)
    for place, noun in PLACES.items():
        for name in sorted(str(n) for n in messages if str(n).startswith(place + ".")):
            said = "; ".join(map(str, messages[name]))
            parts.append(f"{noun} {name.split('.', 1)[1]!r} is invalid: {said}")
    if body:
        parts.append("the request is well-formed JSON but some fields are invalid: " + ", ".join(body))
    return Problem(422, "; ".join(parts), errors=messages)


def flatten_errors(errors: dict, prefix: str = "") -> dict[str, list]:
    """{"projections": {"query": [...]}} -> {"projections.query": [...]}: one level, dotted names."""
    flat: dict[str, list] = {}
    for key, value in errors.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten_errors(value, f"{name}."))
        else:
            flat[name] = value if isinstance(value, list) else [value]
    return flat


def unavailable(detail: str, args: dict[str, Any] | None = None) -> Problem:
    return Problem(503, detail, args=args, headers={"Retry-After": RETRY_AFTER_SECONDS}, slug="database-unavailable")


def database_unavailable(error: Exception) -> Problem:
    """The answer when the database did not answer: DatabaseUnavailable, or no free connection.
    The client reads what to do, never the driver's words (they name files, hosts, tables); the
    log gets one line with them, no traceback: these are expected conditions, not bugs."""
    log.warning("database unavailable: %s", _said(error))
    if isinstance(error, SQLAlchemyTimeout):
        return unavailable(N_("every database connection is busy, try again shortly"))
    return unavailable(N_("the database is unavailable, try again shortly"))


def database_problem(error: Exception) -> Problem | None:
    """The 503 for a database that did not answer or took no write (unavailable, no free
    connection, a lock held past the busy timeout, a lost connection, a full disk, a read-only
    database); None for an error that is a bug."""
    if isinstance(error, (DatabaseUnavailable, SQLAlchemyTimeout)):
        return database_unavailable(error)
    if isinstance(error, DBAPIError) and _is_transient(error):
        log.warning("database unavailable: %s", _said(error))
        return unavailable(BUSY)
    return None


def _said(error: Exception) -> str:
    """The driver's first line, for the log."""
    cause = getattr(error, "orig", None) or error
    first = (str(cause).splitlines() or [""])[0][:300]
    return f"{type(cause).__name__}: {first}"


def init_app(app: Flask) -> None:
    @app.errorhandler(Problem)
    def _problem(problem: Problem):
        return problem.response()

    @app.errorhandler(HTTPException)
    def _http(error: HTTPException):
        return http_problem(error).response()

    @app.errorhandler(DatabaseUnavailable)
    @app.errorhandler(SQLAlchemyTimeout)
    def _unavailable(error: Exception):
        return database_unavailable(error).response()

    @app.errorhandler(DBAPIError)
    def _dbapi(error: DBAPIError):
        # Locks held past the busy timeout, lost connections, no room, read-only: 503, retry.
        problem = database_problem(error)
        if problem is None:
            raise error
        return problem.response()


# PostgreSQL's SQLSTATEs for a database that cannot take the request now: connection exceptions
# (08), insufficient resources (53: a full disk, no memory, too many connections), an operator's
# intervention (57P: shutting down, cannot connect now), a read-only transaction (25006, a replica
# or default_transaction_read_only), a lock not available (55P03).
UNAVAILABLE_SQLSTATES = ("08", "53", "57P", "25006", "55P03")


def _is_transient(error: DBAPIError) -> bool:
    if error.connection_invalidated:
        return True
    if (getattr(error.orig, "sqlstate", None) or "").startswith(UNAVAILABLE_SQLSTATES):
        return True
    text = str(error.orig).lower()
    markers = (
        "database is locked",
        "database is busy",
        "could not connect",
        "connection refused",
        "server closed the connection",
        "terminating connection",
        "connection timeout",
        "timeout expired",
        "the database system is",
        "no connection to the server",
        "consuming input failed",
        "connection is closed",
    )
    return any(m in text for m in markers) or type(error.orig).__name__ in ("OperationalError",)


REALM = 'realm="attention-workbench"'


def unauthorized(detail: str, *, basic: bool = False) -> Problem:
    """401 with the schemes this route takes in `WWW-Authenticate` (Basic only where it works)."""
    offered = f"Bearer {REALM}, Basic {REALM}" if basic else f"Bearer {REALM}"
    return Problem(401, detail, headers={"WWW-Authenticate": offered}, slug="unauthorized")
