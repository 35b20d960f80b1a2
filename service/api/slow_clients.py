"""Clients that stop reading, or trickle what they send, cannot hold a worker thread for long.

Behind the shipped nginx (deploy/nginx.conf) such clients never reach gunicorn. Without it
(`make run`, a bare gunicorn), each request's socket gets a timeout before its body is read:
a receive or a send that makes no progress for `client_stall_seconds` fails, so a reader that
stops frees its thread (gunicorn closes the connection) and a body that stalls is a 408. A
body must also arrive whole within `body_seconds` (strict_input.read_body_bytes).
"""

from __future__ import annotations

import heapq
import itertools
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

from flask import Flask, current_app, request

TICK = 0.1  # seconds: how late a deadline may be acted on, at most


class Watchdog:
    """One thread per process that shuts the reading side of sockets whose deadline passed (a
    read blocked on a trickling client then returns), instead of a timer thread per request."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, socket.socket]] = []
        self._live: set[int] = set()
        self._ids = itertools.count()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None

    def arm(self, sock: socket.socket, seconds: float) -> int:
        with self._wake:
            if self._thread is None or not self._thread.is_alive():  # one per process, after any fork
                self._thread = threading.Thread(target=self._run, name="body-deadlines", daemon=True)
                self._thread.start()
            ticket = next(self._ids)
            due = time.monotonic() + seconds
            # The thread sleeps until the earliest entry's time; wake it only when this deadline
            # comes sooner (a wake per request would cost a thread switch per request).
            sooner = not self._heap or due < self._heap[0][0]
            heapq.heappush(self._heap, (due, ticket, sock))
            self._live.add(ticket)
            if sooner:
                self._wake.notify()
            return ticket

    def disarm(self, ticket: int) -> None:
        with self._wake:
            self._live.discard(ticket)

    def _run(self) -> None:
        with self._wake:
            while True:
                if not self._heap:
                    self._wake.wait()
                    continue
                due = self._heap[0][0]
                if due > time.monotonic():
                    # At most one wake a TICK: every request arms a deadline, and waking for each
                    # one's (long passed, long disarmed) entry cost a thread switch and the GIL
                    # per request. A deadline of seconds can be a tenth of a second late.
                    self._wake.wait(max(due - time.monotonic(), TICK))
                    continue
                now = time.monotonic()
                while self._heap and self._heap[0][0] <= now:  # every entry that is due, at once
                    _, ticket, sock = heapq.heappop(self._heap)
                    if ticket in self._live:  # else disarmed: its request finished in time
                        self._live.discard(ticket)
                        with suppress(OSError):
                            sock.shutdown(socket.SHUT_RD)


WATCHDOG = Watchdog()


@contextmanager
def body_deadline(seconds: float, sock: socket.socket | None) -> Iterator[Callable[[], bool]]:
    """Yields `late()`: whether the body's time is up. Behind gunicorn (which hands the app its
    socket) a read still blocked at the deadline returns, cut short; the answer can still be sent."""
    ends = time.monotonic() + seconds
    ticket = WATCHDOG.arm(sock, seconds) if sock is not None else None
    try:
        yield lambda: time.monotonic() >= ends
    finally:
        if ticket is not None:
            WATCHDOG.disarm(ticket)


def time_out_stalled_sockets() -> None:
    sock = request.environ.get("gunicorn.socket")
    if sock is not None:  # gunicorn hands the app its client socket; other servers: nothing to do
        sock.settimeout(current_app.extensions["settings"].client_stall_seconds)


def init_app(app: Flask) -> None:
    app.before_request(time_out_stalled_sockets)
