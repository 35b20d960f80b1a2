"""SQLite's WAL checkpoints, run after a writer's turn instead of inside it.

By default the connection that commits past 1,000 WAL pages copies them into the database
file and syncs it, still holding the write lock: every other writer, in every worker, waits for
that disk sync. Batches of events crossed the threshold every few commits, and the waits cost
a third of the ingest rate. Connections here never checkpoint on commit (wal_autocheckpoint=0);
a writer that has finished its turn runs a PASSIVE checkpoint instead, at most every
`EVERY` seconds per process. PASSIVE never blocks writers, and they never block it.

But beside writers that never pause, a PASSIVE checkpoint never catches up: there are always
frames committed after it started, so the WAL is never restarted and its file grows with every
write (800 MB in 8 s of batched ingest). Once the WAL holds more than `LIMIT_FRAMES` frames, the
checkpoint takes a writers' turn (no writer commits meanwhile), copies what is left and
truncates the file; writers wait for that one, about every 64 MB of WAL. Durability is
unchanged: commits are in the WAL either way.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager

from sqlalchemy import Engine

EVERY = 0.2  # seconds between checkpoints of one process, while it writes
LIMIT_FRAMES = 16384  # WAL frames (64 MiB of 4 KiB pages) past which a checkpoint takes a writers' turn
TURN_BUSY_MS = 200  # how long that checkpoint waits for readers of older snapshots, at most

log = logging.getLogger(__name__)


class Checkpoints:
    """One per Database and process: `after_write(engine, writers_turn)` checkpoints when one is due."""

    def __init__(self) -> None:
        self._last = 0.0
        self._running = threading.Lock()

    def after_write(self, engine: Engine, writers_turn: Callable[[], AbstractContextManager[None]]) -> None:
        """A PASSIVE checkpoint when one is due; inside `writers_turn()` when the WAL is past its bound."""
        if time.monotonic() - self._last < EVERY or not self._running.acquire(blocking=False):
            return  # not due, or another thread of this process is at it
        try:
            self._last = time.monotonic()
            if _checkpoint(engine, "PASSIVE") > LIMIT_FRAMES:
                with writers_turn():  # nobody commits meanwhile: it finishes, and the file starts over
                    _checkpoint(engine, "TRUNCATE", busy_ms=TURN_BUSY_MS)
        except Exception:  # noqa: BLE001 - a checkpoint that fails now is done by the next one
            log.warning("WAL checkpoint failed; the next write tries again", exc_info=True)
        finally:
            self._running.release()


def _checkpoint(engine: Engine, mode: str, busy_ms: int | None = None) -> int:
    """Run a checkpoint; the frames the WAL held. `busy_ms`: this connection's busy timeout for it
    (a reader of an older snapshot can hold up TRUNCATE; the writers waiting meanwhile should not)."""
    pooled = engine.raw_connection()
    try:
        raw = pooled.driver_connection
        assert isinstance(raw, sqlite3.Connection)
        if busy_ms is None:
            return int(raw.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()[1])
        before = raw.execute("PRAGMA busy_timeout").fetchone()[0]
        raw.execute(f"PRAGMA busy_timeout={int(busy_ms)}")
        try:
            return int(raw.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()[1])
        finally:
            raw.execute(f"PRAGMA busy_timeout={int(before)}")
    finally:
        pooled.close()
