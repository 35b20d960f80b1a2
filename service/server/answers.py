"""Answers the main loop sends (worker.py): a thread writes its whole answer into memory while it
fits in the answer's room, and is free at once; the main loop then sends it without blocking,
however slowly the client reads, within the send deadline (nginx's response buffering, inside the
server). An answer past its room goes to a temporary file (nginx's proxy_temp_path), which the main
loop sends a chunk at a time: no thread ever waits on a reader. Together a worker holds at most
`budget` bytes of answers and of bodies still arriving (`Budget`); past it, new bodies are refused
with 503 and answers go to disk."""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from typing import Any

CHUNK = 256 * 1024  # of an answer on disk, read and sent at a time


class HeldAnswer:
    """The socket a thread writes one request's answer to: bytes kept in memory up to `room`, the
    whole answer on disk (`spool`) once it is past it."""

    def __init__(self, sock: Any, room: int):
        self.sock, self.room = sock, room
        self.held = bytearray()
        self.spool: Any = None  # past its room: the answer's file, for the main loop to send

    def sendall(self, data: bytes) -> None:
        if self.spool is None and len(self.held) + len(data) <= self.room:
            self.held += data
            return
        self._to_disk().write(data)

    def sendfile(self, file: Any, offset: int = 0, count: int | None = None) -> int:
        file.seek(offset)
        if self.spool is None and count is not None and len(self.held) + count <= self.room:
            data = file.read(count)
            self.held += data
            return len(data)
        spool = self._to_disk()
        start = spool.tell()
        if count is None:
            shutil.copyfileobj(file, spool, CHUNK)
        else:
            spool.write(file.read(count))
        return spool.tell() - start

    def _to_disk(self) -> Any:
        if self.spool is None:
            self.spool = tempfile.TemporaryFile(prefix="workbench-answer-")  # noqa: SIM115 - the main loop closes it
            self.spool.write(self.held)
            self.held = bytearray()
        return self.spool

    def done(self) -> None:
        if self.spool is not None:
            self.spool.seek(0)

    def __getattr__(self, name: str) -> Any:  # settimeout, shutdown, fileno, ...: the socket's own
        return getattr(self.sock, name)


def refill(conn: Any, seconds: float) -> None:
    """An answer on disk whose sent part is out: its next chunk, and the send deadline moved on (a client
    that reads keeps its answer coming; one that stops is cut at the deadline)."""
    if not conn.outgoing and conn.spool is not None:
        conn.outgoing = memoryview(conn.spool.read(CHUNK))
        conn.deadline = time.monotonic() + seconds


def release(conn: Any) -> None:
    """The answer's file, if any, closed (sent, or the client gone)."""
    if conn.spool is not None:
        conn.spool.close()
        conn.spool = None


class Budget:
    """Bytes one worker holds for clients (bodies arriving, answers not yet sent), shared by the
    main loop and the threads. Bodies are counted per network too (a /24, a /48): one network holds at
    most half, as it holds at most half the threads, so another's requests always find room."""

    def __init__(self, total: int):
        self.total, self.used = total, 0
        self.by_network: dict[str, int] = {}
        self._lock = threading.Lock()

    def take(self, amount: int, network: str | None = None) -> bool:
        with self._lock:
            held = self.by_network.get(network, 0) if network else 0
            if self.used + amount > self.total or (network and held + amount > self.total // 2):
                return False
            self.used += amount
            if network:
                self.by_network[network] = held + amount
            return True

    def hold(self, amount: int) -> None:
        """Count bytes already held (an answer written): the room of what comes after shrinks."""
        with self._lock:
            self.used += amount

    def give(self, amount: int, network: str | None = None) -> None:
        with self._lock:
            self.used = max(0, self.used - amount)
            if network and network in self.by_network:
                self.by_network[network] -= amount
                if self.by_network[network] <= 0:
                    del self.by_network[network]

    def room(self, most: int) -> int:
        """How much of `most` an answer may hold now."""
        with self._lock:
            return max(0, min(most, self.total - self.used))


def cut(log: Any, address: Any, seconds: float) -> None:
    """A client that did not read its answer within the send deadline: one warning line, and the count of
    them in the metrics (imported here, once a worker runs: the master imports this module before the
    metrics directory exists)."""
    from ..observability import CUT_ANSWERS

    log.warning("cut %s: its answer was not read within %g s", address, seconds)
    CUT_ANSWERS.inc()
