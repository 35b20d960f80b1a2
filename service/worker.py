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
LATE = (
    b"HTTP/1.1 408 Request Timeout\r\nContent-Type: application/problem+json\r\nConnection: close\r\n"
    b"Content-Length: %d\r\n\r\n%s"
)


def late_body(seconds: float) -> bytes:
    detail = (
        b'{"type":"https://attention-workbench.invalid/problems/request-timeout","title":"Request Timeout",'
        b'"status":408,"detail":"the request did not arrive within %g s; send it whole, without pauses"}' % seconds
    )
    return LATE % (len(detail), detail)


def arrived(buffer: bytes | bytearray, body_limit: int, header_limit: int) -> bool:
    """Whether the request in `buffer` can go to a thread: whole, or past what will be read anyway
    (a declared body over the limit, headers over theirs: the thread refuses it without waiting),
    or waiting for `100 Continue`, which the thread sends."""
    end = buffer.find(HEADERS_END)
    if end < 0:
        return len(buffer) > header_limit
    head = bytes(buffer[:end]).lower()
    body = len(buffer) - end - len(HEADERS_END)
    if EXPECT_CONTINUE.search(head) and body == 0:
        return True
    if CHUNKED.search(head):
        rest = bytes(buffer[end + 2 :])  # from the CRLF before the first chunk's size
        last = rest.find(b"\r\n0\r\n")
        return body > body_limit or (last >= 0 and rest.endswith(HEADERS_END) and len(rest) >= last + 7)
    length = CONTENT_LENGTH.search(head)
    if length:
        declared = int(length.group(1))
        return declared > body_limit or body >= declared
    return True  # no body


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
            self.nr_conns -= 1
            conn.close()
            return
        conn.buffered += self.scratch[:size]
        if self._arrived(conn):
            self._forget(conn)

    def _arrived(self, conn) -> bool:
        if not arrived(conn.buffered, self.body_limit, self.header_limit):
            return False
        if conn.parser is None:
            conn.parser = http.get_parser(self.cfg, conn.sock, conn.client)
            conn.parser.unreader = HeldUnreader(conn.sock)
        conn.parser.unreader.hold(conn.buffered)
        conn.buffered = bytearray()
        conn.data_ready = conn.whole = True
        self.enqueue_req(conn)
        return True

    def _forget(self, conn):
        if conn in self.arriving:
            del self.arriving[conn]
            try:
                self.poller.unregister(conn.sock)
            except (KeyError, ValueError, OSError):
                pass

    def murder_pending(self):
        """Also: requests still arriving at their deadline are answered 408 and closed."""
        super().murder_pending()
        now = time.monotonic()
        for conn in [c for c in self.arriving if c.deadline <= now]:
            self._forget(conn)
            try:
                conn.sock.send(late_body(self.body_seconds))
            except OSError:
                pass
            self.nr_conns -= 1
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()
