"""Read a JSON request body safely: content type, size (chunked included), strict parsing."""

from __future__ import annotations

from typing import Any

from flask import current_app, g, request
from webargs import core
from webargs.flaskparser import FlaskParser

from .jsonio import InvalidJSON, loads_strict
from .problems import Problem

_CACHE = "_workbench_json_body"


def read_body_bytes() -> bytes:
    limit = current_app.config["MAX_CONTENT_LENGTH"]
    environ = request.environ
    if request.content_length is None and "wsgi.input_terminated" in environ:
        # Chunked upload: Werkzeug's limited stream would silently truncate at the limit
        # (seen behind gunicorn). Read one byte past it from the server's own stream instead.
        data = environ["wsgi.input"].read(limit + 1)
        if len(data) > limit:
            raise Problem(413, f"the request body is larger than the limit of {limit} bytes", extra={"limit": limit})
        return data
    return request.get_data(cache=True)  # Werkzeug raises 413 when Content-Length > limit


def json_body() -> Any:
    """The parsed body of a JSON request, or a 415/413/400 problem."""
    if _CACHE in g:
        return g.get(_CACHE)
    if not core.is_json(request.mimetype):
        got = request.mimetype or "no Content-Type"
        raise Problem(415, f"send the body as application/json (got {got})", slug="unsupported-media-type")
    data = read_body_bytes()
    if not data.strip():
        raise Problem(400, "the request body is empty; send a JSON document", slug="malformed-json")
    try:
        body = loads_strict(data)
    except InvalidJSON as exc:
        raise Problem(
            400,
            f"the body is not valid JSON ({exc}); NaN, Infinity and numbers beyond float64 range are not JSON",
            slug="malformed-json",
        ) from None
    setattr(g, _CACHE, body)
    return body


class StrictParser(FlaskParser):
    """webargs parser whose JSON location goes through `json_body` (orjson, strict)."""

    DEFAULT_VALIDATION_STATUS = 422

    def _raw_load_json(self, req):
        return json_body()
