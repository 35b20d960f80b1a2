"""What the server's main loop reads in a request's bytes before any thread sees them (used by
worker.py): whether it has arrived whole, what to answer at once (100 Continue, 431, 413, a refusal
repeated from penalties.py), and the bytes of those answers, gunicorn's own errors among them. Pure
functions over a buffer; like the worker, it imports nothing that defines a metric at import."""

from __future__ import annotations

import re

import orjson

from . import penalties
from .penalties import EARLY_BYTES

HEADERS_END = b"\r\n\r\n"
CONTENT_LENGTH = re.compile(rb"\r\ncontent-length[ \t]*:[ \t]*(\d+)[ \t]*(?=\r\n|$)")
CHUNKED = re.compile(rb"\r\ntransfer-encoding[ \t]*:[^\r\n]*chunked")
EXPECT_CONTINUE = re.compile(rb"\r\nexpect[ \t]*:[ \t]*100-continue")


def busy_network(seconds: float) -> bytes:
    return refusal(
        503,
        b"Service Unavailable",
        b"your network's requests have held half of this server's threads for %g s; try again shortly" % seconds,
        slug=b"busy",
        retry_after=2,
    )


def full_of_bodies() -> bytes:
    return refusal(
        503,
        b"Service Unavailable",
        b"this server is receiving as many request bodies as it holds at once; try again shortly",
        slug=b"busy",
        retry_after=1,
    )


FIRST_SHARE = 64 * 1024  # of a declared body not yet arrived, held at once (a small body's whole room)


def holds(buffer: bytes | bytearray) -> int:
    """The bytes a request in `buffer` holds in the worker's budget: what has arrived, and of a declared
    body still to come a first share; a large body takes its room as it arrives, so a declaration alone
    holds little (0 until its headers are in)."""
    end = buffer.find(HEADERS_END)
    if end < 0:
        return 0
    length = CONTENT_LENGTH.search(bytes(buffer[:end]).lower())
    declared = end + len(HEADERS_END) + int(length.group(1)) if length else len(buffer)
    return max(len(buffer), min(declared, len(buffer) + FIRST_SHARE))


def late_body(seconds: float) -> bytes:
    return refusal(
        408, b"Request Timeout", b"the request did not arrive within %g s; send it whole, without pauses" % seconds
    )


def arrived(buffer: bytes | bytearray, body_limit: int, header_limit: int) -> bool:
    """Whether the request in `buffer` can go to a thread: whole (a chunked body by its framing, not
    by a last line that looks like one), or past what will be read anyway (a Content-Length over the
    limit: the thread refuses it without reading). A request still waiting for `100 Continue` has
    not arrived: the main loop answers that (`continue_now`); headers over their limit and chunked
    bodies declared over it never go to a thread (`early_answer`)."""
    end = buffer.find(HEADERS_END)
    if end < 0:
        return False
    head = bytes(buffer[:end]).lower()
    body = len(buffer) - end - len(HEADERS_END)
    if CHUNKED.search(head):
        return chunked_arrived(buffer, end + len(HEADERS_END), body_limit)
    length = CONTENT_LENGTH.search(head)
    if length:
        declared = int(length.group(1))
        return declared > body_limit or body >= declared
    return True  # no body


CHUNK_SIZE = re.compile(rb"([0-9a-fA-F]{1,16})(?:;[^\r\n]*)?\r\n")


def chunked_arrived(buffer: bytes | bytearray, start: int, body_limit: int) -> bool:
    """A chunked body has arrived when its chunks, walked by their declared sizes, reach the last
    (size 0) and its trailers end; a chunk that lies about its size waits for the bytes it declared
    (and meets the deadline), and a size line that is not one goes to the thread (which refuses it
    at once). One declared over the limit is answered by the main loop (`early_answer`)."""
    at, total = start, 0
    while True:
        line = CHUNK_SIZE.match(buffer, at)
        if line is None:
            crlf = buffer.find(b"\r\n", at)
            return crlf >= 0 or len(buffer) - at > 64  # a malformed size line: refused at once
        size = int(line.group(1), 16)
        total += size
        if total > body_limit:
            return False  # never to a thread, which would wait for bytes it will refuse
        at = line.end()
        if size == 0:
            return buffer.find(b"\r\n\r\n", at - 2) >= 0  # the trailers (usually none) end with a blank line
        if len(buffer) < at + size + 2:
            return False  # the chunk's bytes are still coming
        at += size + 2  # the data and its CRLF (a wrong terminator: the thread refuses at once)


def continue_now(buffer: bytes | bytearray, body_limit: int) -> bytes | None:
    """A request that asked for `100 Continue` and sent no body yet, with a body within the limit:
    its headers without the Expect line (the main loop answers it, so the thread does not again),
    else None."""
    end = buffer.find(HEADERS_END)
    if end < 0 or len(buffer) > end + len(HEADERS_END):
        return None
    head = bytes(buffer[: end + 2])
    if not EXPECT_CONTINUE.search(head.lower()):
        return None
    length = CONTENT_LENGTH.search(head.lower())
    if length and int(length.group(1)) > body_limit:
        return None  # over the limit: the thread refuses it without asking for the body
    lines = [line for line in head.split(b"\r\n") if not line.lower().startswith(b"expect:")]
    return b"\r\n".join(lines) + b"\r\n"


def early_answer(buffer: bytes | bytearray, body_limit: int, header_limit: int) -> bytes | None:
    """What the main loop answers itself and closes, so no thread waits for bytes it would refuse:
    headers past their limit with no end in sight (431), a chunked body declared over the limit
    (413). None: nothing to answer yet."""
    end = buffer.find(HEADERS_END)
    if end < 0:
        return (
            refusal(
                431, b"Request Header Fields Too Large", b"the request's headers are over the limit this server reads"
            )
            if len(buffer) > header_limit
            else None
        )
    if CHUNKED.search(bytes(buffer[:end]).lower()) and chunked_total(buffer, end + len(HEADERS_END)) > body_limit:
        return refusal(413, b"Content Too Large", b"the request body is larger than the limit of %d bytes" % body_limit)
    return None


def chunked_total(buffer: bytes | bytearray, at: int) -> int:
    """The bytes a chunked body's size lines declare, as far as they have arrived."""
    total = 0
    while (line := CHUNK_SIZE.match(buffer, at)) is not None and (size := int(line.group(1), 16)):
        total += size
        at = line.end() + size + 2
    return total


def refusal(status: int, reason: bytes, detail: bytes, slug: bytes = b"", retry_after: int = 0) -> bytes:
    slug = slug or reason.lower().replace(b" ", b"-")
    body = b'{"type":"https://attention-workbench.invalid/problems/%s","title":"%s","status":%d,"detail":%s}' % (
        slug,
        reason,
        status,
        orjson.dumps(detail.decode()),
    )
    retry = b"Retry-After: %d\r\n" % retry_after if retry_after else b""
    return (
        b"HTTP/1.1 %d %s\r\nContent-Type: application/problem+json\r\nConnection: close\r\n%s"
        b"Content-Length: %d\r\n\r\n%s" % (status, reason, retry, len(body), body)
    )


SESSION_COOKIE = re.compile(rb"\r\ncookie:[^\r\n]*workbench_session=")
REPEATED = {429: (b"Too Many Requests", b"rate-limited"), 503: (b"Service Unavailable", b"busy")}


def repeated_refusal(buffer: bytes | bytearray, address: str) -> bytes | None:
    """The refusal the edge gave this address (or its network) a moment ago, repeated from the
    request's headers alone while its Retry-After runs (penalties.py); None: the
    request goes on."""
    end = buffer.find(HEADERS_END)
    if end < 0:
        return None
    head = bytes(buffer[:end]).lower()
    target = head.split(b" ", 2)[1] if head.count(b" ") >= 2 else b""
    if not target.startswith((b"/api/v1/", b"/lti/")):
        return None
    anonymous = b"\r\nauthorization:" not in head and not SESSION_COOKIE.search(head)
    length = CONTENT_LENGTH.search(head)
    large = target.startswith(b"/api/v1/") and length is not None and int(length.group(1)) >= EARLY_BYTES
    found = penalties.refusal_for(address, anonymous, large)
    if found is None:
        return None
    status, seconds, detail = found
    reason, slug = REPEATED[status]
    return refusal(status, reason, detail.encode(), slug=slug, retry_after=seconds)


CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
