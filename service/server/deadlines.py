"""Deadlines on sockets, kept by one thread per process: at its deadline a socket's reading side
(a body still arriving) or both sides (an answer still being sent to a client that does not read)
are shut, so a thread blocked on it returns. The edge arms the body's (service/edge/body.py), the
worker an answer's (worker.py)."""

from __future__ import annotations

import heapq
import itertools
import socket
import threading
import time
from contextlib import suppress

TICK = 0.1  # seconds: how late a deadline may be acted on, at most


class Watchdog:
    """One thread per process that shuts sockets whose deadline passed, instead of a timer thread
    per request: their reading side (a read blocked on a trickling client returns), or with
    `how=socket.SHUT_RDWR` both (a send blocked on a client that does not read returns)."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, socket.socket, int]] = []
        self._live: set[int] = set()
        self._ids = itertools.count()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None

    def arm(self, sock: socket.socket, seconds: float, how: int = socket.SHUT_RD) -> int:
        with self._wake:
            if self._thread is None or not self._thread.is_alive():  # one per process, after any fork
                self._thread = threading.Thread(target=self._run, name="body-deadlines", daemon=True)
                self._thread.start()
            ticket = next(self._ids)
            due = time.monotonic() + seconds
            # The thread sleeps until the earliest entry's time; woken only when this one is sooner.
            sooner = not self._heap or due < self._heap[0][0]
            heapq.heappush(self._heap, (due, ticket, sock, how))
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
                    # At most one wake a TICK: a deadline of seconds may be a tenth of a second late.
                    self._wake.wait(max(due - time.monotonic(), TICK))
                    continue
                now = time.monotonic()
                while self._heap and self._heap[0][0] <= now:  # every entry that is due, at once
                    _, ticket, sock, how = heapq.heappop(self._heap)
                    if ticket in self._live:  # else disarmed: its request finished in time
                        self._live.discard(ticket)
                        with suppress(OSError):
                            sock.shutdown(how)


WATCHDOG = Watchdog()
