"""The gunicorn worker the service runs on (`gunicorn.conf.py`, and so `make run`): gunicorn's own
threaded worker, except that a request reaches a thread only once it has arrived whole.

gunicorn's gthread worker hands a connection to a thread as soon as its first bytes arrive; the
thread then reads the headers and the body itself, so forty clients that send `{` and then a byte
every few seconds hold forty threads and the service stops answering (issue 31). Here the main
loop, which already waits on every idle keep-alive connection, reads each request into memory
without blocking, and submits it when its headers and body are complete (or it is over the body
limit, for the edge to refuse, or it asks for `100-continue`); the thread's parser then reads
from that buffer and never waits on the network. A request not whole within the body deadline is
answered 408 and closed from the main loop, and one address may hold only so many connections.
The documented proxy (deploy/nginx.conf) still buffers in production; this makes the default
server hold without it. gunicorn's master imports this module before the metrics directory
exists, so it imports nothing that defines a metric (service.edge does).
"""

from __future__ import annotations

import errno
import re
import selectors
import socket
import time
from collections import defaultdict
from functools import partial

from gunicorn import http
from gunicorn.http.unreader import SocketUnreader
from gunicorn.workers.gthread import TConn, ThreadWorker

from .config import Settings

HEADERS_END = b"\r\n\r\n"
CONTENT_LENGTH = re.compile(rb"\r\ncontent-length[ \t]*:[ \t]*(\d+)[ \t]*(?=\r\n|$)")
CHUNKED = re.compile(rb"\r\ntransfer-encoding[ \t]*:[^\r\n]*chunked")
EXPECT_CONTINUE = re.compile(rb"\r\nexpect[ \t]*:[ \t]*100-continue")
READ = 1 << 20  # one recv takes what has arrived, up to this: each recv is a GIL release and re-acquire
PIECE = 65536  # what a thread's parser is handed from the held bytes at a time (one recv's worth)
LINGER_SECONDS = 2.0  # a connection the main loop answered and closes: how long it drains the client's bytes
LINGER_BYTES = 1 << 20  # and how many at most


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
        return refusal(431, b"Request Header Fields Too Large", b"the request's headers are over the limit this "
                       b"server reads") if len(buffer) > header_limit else None  # fmt: skip
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


def refusal(status: int, reason: bytes, detail: bytes) -> bytes:
    slug = reason.lower().replace(b" ", b"-")
    body = (b'{"type":"https://attention-workbench.invalid/problems/%s","title":"%s","status":%d,"detail":"%s"}'
            % (slug, reason, status, detail))  # fmt: skip
    return (b"HTTP/1.1 %d %s\r\nContent-Type: application/problem+json\r\nConnection: close\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (status, reason, len(body), body))  # fmt: skip


CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


class HeldUnreader(SocketUnreader):
    """gunicorn's socket unreader, serving first what the main loop already read, a piece at a
    time, then the socket. gunicorn's Unreader copies all it holds on every read, so a 3 MB body
    pushed back whole with unread() cost 13 to 47 ms of copying under the GIL per request (the
    flood regression in docs/performance.md); a piece at a time, each byte is copied once."""

    def __init__(self, sock, max_chunk=8192):
        super().__init__(sock, max_chunk)
        self.held = memoryview(b"")

    def hold(self, data: bytearray) -> None:
        self.held = memoryview(bytes(self.held) + data if self.held else data)

    def chunk(self, size_hint=None):
        if not self.held:
            return super().chunk(size_hint)
        piece, self.held = bytes(self.held[:PIECE]), self.held[PIECE:]
        return piece

    def take_buffered(self):
        data = super().take_buffered() + bytes(self.held)
        self.held = memoryview(b"")
        return data

    def release(self) -> None:
        """What is still held (a pipelined request) joins gunicorn's own buffer, where its
        worker looks for read-ahead before it waits for the socket again."""
        if self.held:
            self.buf.seek(0, 2)
            self.buf.write(self.held)
            self.held = memoryview(b"")


class CountedConn(TConn):
    """A connection that gives its address's place back when it closes, once."""

    def __init__(self, cfg, sock, client, server, places: dict):
        super().__init__(cfg, sock, client, server)
        self.places = places
        self.address = client[0] if isinstance(client, tuple) else str(client)
        self.buffered = bytearray()
        self.deadline = 0.0
        self.whole = False  # arrived: the next enqueue goes to a thread
        self.counted = True

    def close(self, graceful=False):
        if self.counted:
            self.counted = False
            self.places[self.address] -= 1
            if self.places[self.address] <= 0:
                del self.places[self.address]
        super().close(graceful)


class BufferingWorker(ThreadWorker):
    def init_process(self):
        settings = Settings.load()
        self.body_limit = settings.max_content_length
        self.body_seconds = settings.body_seconds
        self.per_address = settings.connections_per_address
        trusted = self.cfg.forwarded_allow_ips
        self.trusted = set(trusted if isinstance(trusted, list) else str(trusted).split(","))
        self.header_limit = self.cfg.limit_request_line + self.cfg.limit_request_fields * (
            self.cfg.limit_request_field_size + 2
        )
        self.places: dict[str, int] = defaultdict(int)
        self.arriving: dict[CountedConn, None] = {}  # in arrival order: the oldest deadline first
        self.lingering: dict[CountedConn, None] = {}  # answered by the main loop, closing
        self.scratch = memoryview(bytearray(READ))  # the main loop's one receive buffer
        super().init_process()

    def accept(self, listener):
        try:
            client_sock, client_addr = listener.accept()
        except OSError as e:
            if e.errno not in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                raise
            return
        address = client_addr[0] if isinstance(client_addr, tuple) else str(client_addr)
        if self.places[address] >= self.per_address and address not in self.trusted and "*" not in self.trusted:
            self.log.warning("refused a connection: %s holds %d already", address, self.per_address)
            client_sock.close()
            if not self.places[address]:
                del self.places[address]
            return
        self.places[address] += 1
        self.nr_conns += 1
        conn = CountedConn(self.cfg, client_sock, client_addr, listener.getsockname(), self.places)
        self.enqueue_req(conn)

    def enqueue_req(self, conn):
        """Every way a connection reaches a thread (new, kept alive, deferred, pipelined) passes
        here: it goes to the thread only once its request has arrived."""
        if getattr(conn, "whole", True):
            conn.whole = False
            conn.sock.setblocking(True)
            super().enqueue_req(conn)
            return
        if conn.parser is not None:  # bytes read ahead past the last request: this one's start
            conn.buffered += conn.parser.unreader.take_buffered()
        conn.sock.setblocking(False)
        conn.deadline = time.monotonic() + self.body_seconds
        if self._arrived(conn):
            return
        self.arriving[conn] = None
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self.on_arriving, conn))

    def finish_request(self, conn, fs):
        unreader = conn.parser.unreader if conn.parser is not None else None
        if isinstance(unreader, HeldUnreader):
            unreader.release()
        super().finish_request(conn, fs)

    def on_arriving(self, conn, client):
        try:
            size = conn.sock.recv_into(self.scratch)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            size = 0
        if not size:  # gone before its request arrived
            self._forget(conn)
            self._close(conn)
            return
        conn.buffered += self.scratch[:size]
        if self._arrived(conn):
            self._forget(conn)

    def _arrived(self, conn) -> bool:
        """True when the connection needs nothing more from the main loop: its request went to a
        thread, or the main loop answered it and closed it."""
        if not arrived(conn.buffered, self.body_limit, self.header_limit):
            return self._answer_early(conn)
        if conn.parser is None:
            conn.parser = http.get_parser(self.cfg, conn.sock, conn.client)
            conn.parser.unreader = HeldUnreader(conn.sock)
        conn.parser.unreader.hold(conn.buffered)
        conn.buffered = bytearray()
        conn.data_ready = conn.whole = True
        self.enqueue_req(conn)
        return True

    def _answer_early(self, conn) -> bool:
        """What the main loop answers itself: `100 Continue` (then it waits for the body, within the
        same deadline), and what it refuses and closes (`early_answer`). True when it closed."""
        answer = early_answer(conn.buffered, self.body_limit, self.header_limit)
        if answer is not None:
            self._close_with(conn, answer)
            return True
        head = continue_now(conn.buffered, self.body_limit)
        if head is not None:
            conn.buffered = bytearray(head)
            try:
                conn.sock.send(CONTINUE)
            except OSError:
                pass
        return False

    def _close_with(self, conn, answer: bytes) -> None:
        """Answer `answer` from the main loop and close: the connection never reaches a thread.
        The close lingers, as nginx's does: closing with the client's bytes unread would reset
        the connection and could destroy the answer before the client reads it, so what still
        comes is read and dropped (LINGER_BYTES at most) until the client closes or LINGER_SECONDS."""
        self._forget(conn)
        try:
            conn.sock.send(answer)
            conn.sock.shutdown(socket.SHUT_WR)
        except OSError:
            self._close(conn)
            return
        conn.deadline = time.monotonic() + LINGER_SECONDS
        conn.drained = 0
        self.lingering[conn] = None
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self.on_lingering, conn))

    def on_lingering(self, conn, client):
        try:
            size = conn.sock.recv_into(self.scratch)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            size = 0
        conn.drained += size
        if not size or conn.drained > LINGER_BYTES:
            self._forget(conn, self.lingering)
            self._close(conn)

    def _close(self, conn) -> None:
        self.nr_conns -= 1
        conn.close()

    def _forget(self, conn, waiting=None):
        """No longer wait on `conn` (in `self.arriving`, or the `waiting` given)."""
        waiting = self.arriving if waiting is None else waiting
        if conn in waiting:
            del waiting[conn]
            try:
                self.poller.unregister(conn.sock)
            except (KeyError, ValueError, OSError):
                pass

    def murder_pending(self):
        """Also: requests still arriving at their deadline are answered 408 and closed."""
        super().murder_pending()
        now = time.monotonic()
        for conn in [c for c in self.arriving if c.deadline <= now]:
            self._close_with(conn, late_body(self.body_seconds))
        for conn in [c for c in self.lingering if c.deadline <= now]:
            self._forget(conn, self.lingering)
            self._close(conn)
