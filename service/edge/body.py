"""A request's body, read once at the edge: within its deadlines, within the size limit (a
chunked upload included), parsed as strict JSON; and the URL refused when it holds control
characters. Nothing here needs Flask: the edge reads `environ` before any view runs.

Behind the shipped nginx (deploy/nginx.conf) slow clients never reach the app. Without it, a
body must arrive whole within `body_seconds`, and a read that makes no progress for
`client_stall_seconds` fails (gunicorn hands the app its socket; one watchdog thread per
process shuts the reading side of sockets whose deadline passed): a trickling body is a 408.
"""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import unquote_plus

import orjson

from ..server.deadlines import WATCHDOG
from ..text import N_
from .problems import Problem

CHUNK = 65536
CONTROL = re.compile(r"[\x00-\x1f\x7f]")
JSON_TYPE = re.compile(r"^application/(?:[\w.+-]+\+)?json\s*(?:;|$)", re.I)


def is_json(content_type: str | None) -> bool:
    """application/json, or a +json type (problem+json, merge-patch+json), any parameters."""
    return bool(content_type and JSON_TYPE.match(content_type))


def refuse_control_characters(environ: dict[str, Any]) -> None:
    """No NUL or other control character in the path or the query (PostgreSQL text cannot hold
    NUL; nothing this service names contains one). The query is checked percent-decoded, as the
    views read it."""
    query = environ.get("QUERY_STRING", "")
    if CONTROL.search(environ.get("PATH_INFO", "")) or (query and CONTROL.search(unquote_plus(query))):
        raise Problem(
            400, "the URL holds a control character (such as %00); no path or query value may", slug="invalid-url"
        )


@contextmanager
def body_deadline(seconds: float, sock: socket.socket | None) -> Iterator[Callable[[], bool]]:
    """Yields `late()`: whether the body's time is up. Behind gunicorn a read still blocked at
    the deadline returns, cut short; the answer can still be sent."""
    ends = time.monotonic() + seconds
    ticket = WATCHDOG.arm(sock, seconds) if sock is not None else None
    try:
        yield lambda: time.monotonic() >= ends
    finally:
        if ticket is not None:
            WATCHDOG.disarm(ticket)


def has_body(environ: dict[str, Any]) -> bool:
    """Whether the request says a body follows: a Content-Length above 0, or a chunked one."""
    length = environ.get("CONTENT_LENGTH") or ""
    if length.strip() and length.strip() != "0":
        return True
    return "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()  # gunicorn drops the length then


def read_body(environ: dict[str, Any], limit: int, seconds: float, stall_seconds: float) -> bytes:
    """The whole body within `seconds` and `limit` bytes: 408 or 413 otherwise (and the
    connection closes). A chunked upload is read from the server's own stream, one byte past the
    limit (Werkzeug's limited stream silently truncates at the limit, seen behind gunicorn)."""
    sock = environ.get("gunicorn.socket")
    if sock is not None:
        sock.settimeout(stall_seconds)  # a send or receive that makes no progress fails
    length = environ.get("CONTENT_LENGTH") or ""
    if length.isdigit():
        expected = int(length)
        if expected > limit:
            raise _too_large(limit)
    elif environ.get("wsgi.input_terminated") or "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower():
        expected = limit + 1
    else:
        return b""
    stream = environ["wsgi.input"]
    chunks, size = [], 0
    with body_deadline(seconds, sock) as late:
        while size < expected:
            try:
                chunk = stream.read(min(CHUNK, expected - size))  # gunicorn returns only whole chunks
            except OSError:  # a stall past client_stall_seconds, or cut by the deadline
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
        raise _too_large(limit)
    return b"".join(chunks)


def _too_large(limit: int) -> Problem:
    return Problem(
        413,
        N_("the request body is larger than the limit of %(limit)d bytes"),
        args={"limit": limit},
        extra={"limit": limit},
    )


def parse_json(data: bytes) -> Any:
    """Strict JSON (json_codec: no NaN, no Infinity, nothing past float64, no deep nesting), or
    a 400 problem saying what is wrong."""
    if not data.strip():
        raise Problem(400, N_("the request body is empty; send a JSON document"), slug="malformed-json")
    try:
        return orjson.loads(data)  # orjson refuses NaN, Infinity, 1e400 and nesting past 1024 itself
    except orjson.JSONDecodeError as exc:
        raise Problem(
            400,
            f"the body is not valid JSON ({exc}); NaN, Infinity and numbers beyond float64 range are not JSON",
            slug="malformed-json",
        ) from None
