"""SQLite's WAL checkpoints, run after a writer's turn instead of inside it.

By default the connection that commits past 1,000 WAL pages copies them into the database
file and syncs it, still holding the write lock: every other writer, in every worker, waits for
that disk sync. Batches of events crossed the threshold every few commits, and the waits cost
a third of the ingest rate. Connections here never checkpoint on commit (wal_autocheckpoint=0);
a writer that has finished its turn runs a PASSIVE checkpoint instead, at most every
`EVERY` seconds per process. PASSIVE never blocks writers, and they never block it, so the WAL
is still copied back and reused as often as before (its size stays bounded), off the path
every writer queues on. Durability is unchanged: commits are in the WAL either way.
"""

from __future__ import annotations

import logging
import threading
import time

from sqlalchemy import Engine

EVERY = 0.2  # seconds between checkpoints of one process, while it writes

log = logging.getLogger(__name__)


class Checkpoints:
    """One per Database and process: `after_write(engine)` checkpoints when one is due."""

    def __init__(self) -> None:
        self._last = 0.0
        self._running = threading.Lock()

    def after_write(self, engine: Engine) -> None:
        if time.monotonic() - self._last < EVERY or not self._running.acquire(blocking=False):
            return  # not due, or another thread of this process is at it
        try:
            self._last = time.monotonic()
            pooled = engine.raw_connection()
            try:
                pooled.driver_connection.execute("PRAGMA wal_checkpoint(PASSIVE)")  # type: ignore[union-attr]
            finally:
                pooled.close()
        except Exception:  # noqa: BLE001 - a checkpoint that fails now is done by the next one
            log.warning("WAL checkpoint failed; the next write tries again", exc_info=True)
        finally:
            self._running.release()
