"""Strict JSON input: the body read safely (content type, size, chunked included), parsed
strictly (json_codec), and the compute caps checked on the raw JSON before any element is
validated or any array allocated."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote_plus

from flask import current_app, g, request
from webargs import core
from webargs.flaskparser import FlaskParser
from werkzeug.exceptions import ClientDisconnected

from .json_codec import InvalidJSON, loads_strict
from .problems import Problem
from .slow_clients import body_deadline

_CACHE = "_workbench_json_body"


CHUNK = 65536


def read_body_bytes() -> bytes:
    """The whole body, which must arrive within `body_seconds` (a client trickling it would hold
    this thread) and fit `max_content_length`; 408 or 413 otherwise, and the connection closes."""
    limit = current_app.config["MAX_CONTENT_LENGTH"]
    seconds = current_app.extensions["settings"].body_seconds
    environ = request.environ
    if request.content_length is None and "wsgi.input_terminated" in environ:
        # Chunked upload: Werkzeug's limited stream would silently truncate at the limit
        # (seen behind gunicorn). Read one byte past it from the server's own stream instead.
        stream, expected = environ["wsgi.input"], limit + 1
    else:
        stream, expected = request.stream, request.content_length or 0  # Werkzeug: 413 past the limit
    with body_deadline(seconds, environ.get("gunicorn.socket")) as late:
        chunks, size = [], 0
        while size < expected:
            try:
                chunk = stream.read(min(CHUNK, expected - size))  # gunicorn returns only whole chunks
            except (OSError, ClientDisconnected):  # a stall past client_stall_seconds, or cut by the deadline
                chunk = None
            if chunk is None or late():
                raise Problem(
                    408,
                    f"the request body did not arrive within {seconds:g} s; send it whole, without pauses",
                    headers={"Connection": "close"},
                    slug="request-timeout",
                )
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    if size > limit:
        raise Problem(413, f"the request body is larger than the limit of {limit} bytes", extra={"limit": limit})
    return b"".join(chunks)


def json_body() -> Any:
    """The parsed body of a JSON request, or a 415/413/400 problem."""
    if _CACHE in g:
        return g.get(_CACHE)
    require_json()
    body = parse_json_bytes(read_body_bytes())
    setattr(g, _CACHE, body)
    return body


def require_json() -> None:
    if not core.is_json(request.mimetype):
        got = request.mimetype or "no Content-Type"
        raise Problem(415, f"send the body as application/json (got {got})", slug="unsupported-media-type")


def parse_json_bytes(data: bytes) -> Any:
    """Strict JSON (json_codec), or a 400 problem saying what is wrong; needs no request."""
    if not data.strip():
        raise Problem(400, "the request body is empty; send a JSON document", slug="malformed-json")
    try:
        return loads_strict(data)
    except InvalidJSON as exc:
        raise Problem(
            400,
            f"the body is not valid JSON ({exc}); NaN, Infinity and numbers beyond float64 range are not JSON",
            slug="malformed-json",
        ) from None


class StrictParser(FlaskParser):
    """webargs parser whose JSON location goes through `json_body` (orjson, strict)."""

    DEFAULT_VALIDATION_STATUS = 422

    def _raw_load_json(self, req):
        return json_body()


# -- the URL ---------------------------------------------------------------------------------


CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def refuse_control_characters() -> None:
    """Before any view: no NUL or other control character in the path or the query (PostgreSQL
    text cannot hold NUL; nothing this service names contains control characters). The query
    is checked percent-decoded, as the views read it."""
    query = request.query_string
    if CONTROL.search(request.path) or (query and CONTROL.search(unquote_plus(query.decode("latin-1")))):
        raise Problem(
            400,
            "the URL holds a control character (such as %00); no path or query value may",
            slug="invalid-url",
        )


# -- caps on the raw JSON -------------------------------------------------------------------


def _len(value: Any) -> int | None:
    return len(value) if isinstance(value, list) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def check_compute_caps(raw: Any) -> None:
    """413 naming the cap when n, d_model, heads or heads*n*n exceed the configured limits."""
    over = caps_exceeded(raw, current_app.extensions["settings"])
    if over:
        _refuse(over)


def caps_exceeded(raw: Any, settings: Any) -> list[tuple[str, str, int, int]]:
    """(field, cap, value, limit) for every cap the raw JSON body exceeds; [] within them all."""
    if not isinstance(raw, dict):
        return []
    tokens = raw.get("tokens")
    n = _len(tokens)
    d_model = _len(tokens[0]) if n and isinstance(tokens, list) else None
    heads = _int(raw.get("heads"))
    over: list[tuple[str, str, int, int]] = []
    if n is not None and n > settings.max_tokens:
        over.append(("tokens", "max_tokens", n, settings.max_tokens))
    if d_model is not None and d_model > settings.max_d_model:
        over.append(("tokens", "max_d_model", d_model, settings.max_d_model))
    if heads is not None and heads > settings.max_heads:
        over.append(("heads", "max_heads", heads, settings.max_heads))
    if n and heads and heads * n * n > settings.max_score_cells:
        over.append(("heads", "max_score_cells", heads * n * n, settings.max_score_cells))
    projections = raw.get("projections")
    if isinstance(projections, dict):
        for name, matrix in projections.items():
            rows = _len(matrix)
            cols = _len(matrix[0]) if rows else None
            for size in (rows, cols):
                if size is not None and size > settings.max_d_model:
                    over.append((f"projections.{name}", "max_d_model", size, settings.max_d_model))
                    break
    return over


def _refuse(over: list[tuple[str, str, int, int]]) -> None:
    what = {
        "max_tokens": "n (tokens)",
        "max_d_model": "d_model (numbers per row)",
        "max_heads": "heads",
        "max_score_cells": "heads * n * n (the score tensor)",
    }
    details = [f"{what[cap]} is {value}, over the cap {cap} = {limit}" for _, cap, value, limit in over]
    raise Problem(
        413,
        "the request is larger than this service computes: " + "; ".join(details),
        title="Content Too Large",
        errors={field: [f"{what[cap]} {value} exceeds {cap} = {limit}"] for field, cap, value, limit in over},
        slug="over-limit",
        extra={"limits": {cap: limit for _, cap, _, limit in over}},
    )
