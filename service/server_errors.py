"""Errors gunicorn answers itself, before the app sees a request, as problem+json too.

A malformed request line, a URI over `limit_request_line`, a bad Content-Length or too many
headers never reach Flask: gunicorn writes the response itself, as HTML, through
`gunicorn.util.write_error`. `install()` (called in each worker by gunicorn.conf.py's
`post_fork`) replaces that one function, so these answers have the shape every other error
of the service has. Status, reason and gunicorn's message are kept as they are.
"""

from __future__ import annotations

import orjson

from .api.problems import TYPE_BASE


def problem_bytes(status: int, reason: str, message: str) -> bytes:
    """The whole HTTP response gunicorn sends for an error it caught itself."""
    body = orjson.dumps(
        {
            "type": TYPE_BASE + reason.lower().replace(" ", "-"),
            "title": reason,
            "status": status,
            "detail": message or reason,
        }
    )
    head = (
        f"HTTP/1.1 {status} {reason}\r\n"
        "Connection: close\r\n"
        "Content-Type: application/problem+json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode("latin-1") + body


def write_problem(sock, status_int: int, reason: str, mesg: str) -> None:
    from gunicorn import util

    util.write_nonblock(sock, problem_bytes(int(status_int), reason, mesg))


def install() -> None:
    from gunicorn import util

    util.write_error = write_problem
