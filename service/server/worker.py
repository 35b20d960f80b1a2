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
import selectors
import socket
import time
from collections import defaultdict, deque
from functools import partial

from gunicorn import http
from gunicorn.http.unreader import SocketUnreader
from gunicorn.workers.gthread import TConn, ThreadWorker

from ..config import Settings
from .answers import Budget, HeldAnswer, cut, refill, release
from .penalties import block_of
from .wire import (
    CONTINUE,
    arrived,
    busy_network,
    continue_now,
    early_answer,
    full_of_bodies,
    holds,
    late_body,
    repeated_refusal,
)

READ = 1 << 20  # one recv takes what has arrived, up to this: each recv is a GIL release and re-acquire
PIECE = 65536  # what a thread's parser is handed from the held bytes at a time (one recv's worth)
LINGER_SECONDS = 2.0  # a connection the main loop answered and closes: how long it drains the client's bytes
LINGER_BYTES = 1 << 20  # and how many at most
REQUESTS_PER_CONNECTION = 100  # then the connection closes after its answer (nginx's keepalive_requests)


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

    def __init__(self, cfg, sock, client, server, places: dict, budget: Budget):
        super().__init__(cfg, sock, client, server)
        self.places, self.budget = places, budget
        self.address = client[0] if isinstance(client, tuple) else str(client)
        self.buffered = bytearray()
        self.deadline = 0.0
        self.whole = False  # arrived: the next enqueue goes to a thread
        self.counted = True
        self.network: str | None = None  # its thread share's group (None: a trusted proxy, no share)
        self.in_thread = False
        self.reserved = 0  # bytes of the worker's budget its request holds (arriving, or in a thread)
        self.served = 0  # requests answered on this connection
        self.answer: bytearray | None = None  # what the thread wrote, for the main loop to send
        self.spool = None  # or the file it wrote it to, past the answer's room
        self.outgoing = memoryview(b"")
        self.sending = 0  # the bytes of the answer being sent, held in the budget
        self.after = None  # the thread's result, acted on once the answer is sent

    def close(self, graceful=False):
        self.budget.give(self.reserved, self.network)
        self.budget.give(self.sending)
        self.reserved = self.sending = 0
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
        self.stall_seconds, self.send_seconds = settings.client_stall_seconds, settings.send_seconds
        self.answer_room = settings.answer_room_bytes
        self.budget = Budget(settings.client_bytes_per_worker)  # bodies arriving, answers not yet sent
        self.sending: dict[CountedConn, None] = {}  # answers the main loop is sending, oldest first
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
        # One network (a /24, a /48) holds at most half the threads; its further whole requests
        # wait their turn in the main loop, so another network's requests always find a thread.
        self.thread_share = max(1, self.cfg.threads // 2)
        self.in_threads: dict[str, int] = defaultdict(int)
        self.turns: dict[str, deque[CountedConn]] = {}
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
        conn = CountedConn(self.cfg, client_sock, client_addr, listener.getsockname(), self.places, self.budget)
        if address not in self.trusted and "*" not in self.trusted:
            conn.network = block_of(address)
        self.enqueue_req(conn)

    def enqueue_req(self, conn):
        """Every way a connection reaches a thread (new, kept alive, deferred, pipelined) passes
        here: it goes to the thread only once its request has arrived."""
        if getattr(conn, "whole", True):
            network = getattr(conn, "network", None)
            if network is not None and not conn.in_thread:
                if self.in_threads[network] >= self.thread_share:
                    conn.deadline = time.monotonic() + self.body_seconds
                    self.turns.setdefault(network, deque()).append(conn)  # its network's turn comes
                    return
                self.in_threads[network] += 1
                conn.in_thread = True
            conn.whole = False  # the thread makes the socket blocking again (gunicorn's handle)
            super().enqueue_req(conn)
            return
        if conn.parser is not None:  # bytes read ahead past the last request: this one's start
            conn.buffered += conn.parser.unreader.take_buffered()
        conn.sock.setblocking(False)
        conn.deadline = time.monotonic() + self.body_seconds
        if self._arrived(conn):
            return
        # A kept-alive connection comes here because it is readable: what has arrived is read now,
        # and the poller waits only for a request still arriving (one select and register saved).
        if not self._take(conn):
            self.arriving[conn] = None
            self.poller.register(conn.sock, selectors.EVENT_READ, partial(self.on_arriving, conn))

    def handle_request(self, req, conn):
        """In the thread: every request gets the stall timeout, and its answer is written into
        memory for the main loop to send (`HeldAnswer`); one too large for its room, to a file the
        main loop sends. After REQUESTS_PER_CONNECTION the connection closes."""
        conn.sock.settimeout(self.stall_seconds)  # a send or a read that makes no progress this long fails
        answer = HeldAnswer(conn.sock, self.budget.room(self.answer_room))
        real, conn.sock = conn.sock, answer
        conn.served += 1
        if conn.served >= REQUESTS_PER_CONNECTION:
            req.must_close = True  # its answer says "Connection: close", so the client opens another
        try:
            keep = super().handle_request(req, conn)
        finally:
            conn.sock = real
            answer.done()
        if answer.held:
            self.budget.hold(len(answer.held))  # counted at once: the room of the answers after it shrinks
            conn.answer = answer.held
        conn.spool = answer.spool  # past the room: on disk, sent a chunk at a time by the main loop
        return keep and conn.served < REQUESTS_PER_CONNECTION

    def finish_request(self, conn, fs):
        unreader = conn.parser.unreader if conn.parser is not None else None
        if isinstance(unreader, HeldUnreader):
            unreader.release()
        if getattr(conn, "in_thread", False):
            self._thread_freed(conn.network)
            conn.in_thread = False
        self.budget.give(getattr(conn, "reserved", 0), getattr(conn, "network", None))
        conn.reserved = 0
        held, conn.answer = getattr(conn, "answer", None), None
        if held or conn.spool:
            conn.outgoing, conn.after, conn.sending = memoryview(held or b""), fs, len(held or b"")
            refill(conn, self.send_seconds)
            conn.sock.setblocking(False)
            if not self._send_some(conn):
                conn.deadline = time.monotonic() + self.send_seconds
                self.sending[conn] = None
                self.poller.register(conn.sock, selectors.EVENT_WRITE, partial(self.on_writable, conn))
                return
        self._sent(conn, fs)

    def _send_some(self, conn) -> bool:
        """Send what the socket takes now; True when the answer is all sent, or cannot be."""
        try:
            sent = conn.sock.send(conn.outgoing)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            conn.outgoing = memoryview(b"")
            conn.after = None  # the client is gone: close
            return True
        conn.outgoing = conn.outgoing[sent:]
        refill(conn, self.send_seconds)
        return not conn.outgoing

    def on_writable(self, conn, client):
        if self._send_some(conn):
            self._forget(conn, self.sending)
            self._sent(conn, conn.after)

    def _sent(self, conn, fs) -> None:
        """The answer is out (or cannot go): the thread's result decides the connection's next step."""
        self.budget.give(conn.sending)
        release(conn)
        conn.outgoing, conn.after, conn.sending = memoryview(b""), None, 0
        if fs is None:
            self._close(conn)
        else:
            super().finish_request(conn, fs)

    def _thread_freed(self, network: str) -> None:
        """A thread of `network`'s share is free: its next waiting request takes it."""
        self.in_threads[network] -= 1
        if self.in_threads[network] <= 0:
            del self.in_threads[network]
        waiting = self.turns.get(network)
        while waiting:
            conn = waiting.popleft()
            if conn.counted:  # not closed while it waited
                self.enqueue_req(conn)
                break
        if waiting is not None and not waiting:
            del self.turns[network]

    def _receive(self, conn) -> int | None:
        """Bytes read into the scratch buffer: None, nothing yet; 0, the client has gone."""
        try:
            return conn.sock.recv_into(self.scratch)
        except (BlockingIOError, InterruptedError):
            return None
        except OSError:
            return 0

    def on_arriving(self, conn, client):
        if self._take(conn):
            self._forget(conn)

    def _take(self, conn) -> bool:
        """Read what has arrived; True when the connection no longer waits in `self.arriving`:
        its request went to a thread, or it was answered or closed."""
        size = self._receive(conn)
        if size is None:
            return False
        if not size:  # gone before its request arrived
            self._forget(conn)
            self._close(conn)
            return True
        conn.buffered += self.scratch[:size]
        need = holds(conn.buffered) - conn.reserved
        if need > 0 and not self.budget.take(need, conn.network):  # past what this worker holds, or its network
            self._close_with(conn, full_of_bodies())
            return True
        conn.reserved += max(0, need)
        return self._arrived(conn)

    def _arrived(self, conn) -> bool:
        """True when the connection needs nothing more from the main loop: its request went to a
        thread, or the main loop answered it and closed it."""
        repeated = None if conn.address in self.trusted else repeated_refusal(conn.buffered, conn.address)
        if repeated is not None:
            self._close_with(conn, repeated)
            return True
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
        size = self._receive(conn)
        if size is None:
            return
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
        for conn in [c for c in self.sending if c.deadline <= now]:  # a client that does not read its answer
            cut(self.log, conn.address, self.send_seconds)
            self._forget(conn, self.sending)
            self._sent(conn, None)
        for network, waiting in list(self.turns.items()):
            while waiting and waiting[0].deadline <= now:  # its network's threads stayed busy too long
                self._close_with(waiting.popleft(), busy_network(self.body_seconds))
            if not waiting:
                del self.turns[network]
