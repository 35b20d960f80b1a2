"""Answers the main loop sends (worker.py): a thread writes its whole answer into memory while it
fits in the answer's room, and is free at once; the main loop then sends it without blocking,
however slowly the client reads, within the send deadline (nginx's response buffering, inside the
server). An answer past its room is written by the thread itself, under the stall timeout and the
send deadline. Together a worker holds at most `budget` bytes of answers and of bodies still
arriving (`Budget`); past it, new bodies are refused with 503 and answers go straight out."""

from __future__ import annotations

import socket
import threading
from typing import Any

from .deadlines import WATCHDOG


class HeldAnswer:
    """The socket a thread writes one request's answer to: bytes kept in memory up to `room`;
    past it the thread sends them itself, and from then on its sends end within `seconds`."""

    def __init__(self, sock: Any, room: int, seconds: float):
        self.sock, self.room, self.seconds = sock, room, seconds
        self.held = bytearray()
        self.direct = False  # past its room: the thread writes itself
        self.ticket: int | None = None

    def sendall(self, data: bytes) -> None:
        if not self.direct and len(self.held) + len(data) <= self.room:
            self.held += data
            return
        self._go_direct()
        self.sock.sendall(data)

    def sendfile(self, file: Any, offset: int = 0, count: int | None = None) -> int:
        if not self.direct and count is not None and len(self.held) + count <= self.room:
            file.seek(offset)
            data = file.read(count)
            self.held += data
            return len(data)
        self._go_direct()
        return self.sock.sendfile(file, offset, count)

    def _go_direct(self) -> None:
        if not self.direct:
            self.direct = True
            self.ticket = WATCHDOG.arm(self.sock, self.seconds, socket.SHUT_RDWR)  # a reader that stops: cut
            if self.held:
                self.sock.sendall(self.held)
                self.held = bytearray()

    def done(self) -> None:
        if self.ticket is not None:
            WATCHDOG.disarm(self.ticket)

    def __getattr__(self, name: str) -> Any:  # settimeout, shutdown, fileno, ...: the socket's own
        return getattr(self.sock, name)


class Budget:
    """Bytes one worker holds for clients (bodies arriving, answers not yet sent), shared by the
    main loop and the threads."""

    def __init__(self, total: int):
        self.total, self.used = total, 0
        self._lock = threading.Lock()

    def take(self, amount: int) -> bool:
        with self._lock:
            if self.used + amount > self.total:
                return False
            self.used += amount
            return True

    def hold(self, amount: int) -> None:
        """Count bytes already held (an answer written): the room of what comes after shrinks."""
        with self._lock:
            self.used += amount

    def give(self, amount: int) -> None:
        with self._lock:
            self.used = max(0, self.used - amount)

    def room(self, most: int) -> int:
        """How much of `most` an answer may hold now."""
        with self._lock:
            return max(0, min(most, self.total - self.used))
