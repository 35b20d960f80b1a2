"""SQLite's WAL is copied back into the database file after a writer's turn, never inside it
(service/db/wal.py): the WAL stays as small as before, and no writer waits for a checkpoint."""

import os
import sqlite3

import pytest

from service.db import Database, wal
from service.db.events import NewEvent, write_events
from service.db.platforms import ensure_platform

from ..api.helpers import LESSON


def batch(n: int, start: int) -> list[NewEvent]:
    import datetime as dt
    import uuid

    now = dt.datetime.now(dt.UTC)
    return [
        NewEvent(str(uuid.uuid4()), f"l-{i}", LESSON, "experiment", "parameter-changed", None, {"i": i}, now)
        for i in range(start, start + n)
    ]


@pytest.fixture
def database(database_url, app):
    if not database_url.startswith("sqlite"):
        pytest.skip("SQLite's WAL")
    db = Database(database_url)
    with db.write() as session:
        platform = ensure_platform(session, "acme").id
    yield db, database_url.split("///", 1)[1], platform, app.extensions["lessons"]
    db.dispose()


def test_no_connection_checkpoints_when_it_commits(database):
    db, _, _, _ = database
    with db.read() as session:
        assert session.connection().exec_driver_sql("PRAGMA wal_autocheckpoint").scalar_one() == 0


def wal_frames(path: str) -> int:
    """Frames in the WAL since it was last reset (what a checkpoint reports as its log)."""
    with sqlite3.connect(path) as plain:
        return plain.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1]


@pytest.mark.parametrize("due", [True, False])
def test_the_wal_is_copied_back_and_reused_between_writes(database, monkeypatch, due):
    db, path, platform, lessons = database
    monkeypatch.setattr(wal, "EVERY", 0.0 if due else 1e9)  # not due: as if checkpoints never ran
    db._checkpoints._last = 0.0 if due else 1e12  # noqa: SLF001
    write_events(db, platform, batch(200, 0), lessons)
    one_write = wal_frames(path)
    for i in range(1, 30):
        write_events(db, platform, batch(200, i * 200), lessons)
    at_least_every_write = 30 * one_write  # a later write touches no fewer pages than the first
    if due:  # reset after every write: only the last write's frames are in the WAL
        assert wal_frames(path) < at_least_every_write / 4
        with sqlite3.connect(path) as plain:
            assert plain.execute("SELECT count(*) FROM events").fetchone()[0] == 6000
    else:  # the check above can fail: without the checkpoints the WAL holds every write
        assert wal_frames(path) >= at_least_every_write


def test_the_checkpoint_runs_after_the_writers_lock_is_released(database, monkeypatch):
    db, path, platform, lessons = database
    monkeypatch.setattr(wal, "EVERY", 0.0)
    seen = []
    original = wal.Checkpoints.after_write

    def spy(self, engine):
        # another process's writer can take the lock file now: the turn is over
        import fcntl

        fd = os.open(f"{path}.writers.lock", os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            seen.append(True)
        except BlockingIOError:
            seen.append(False)
        finally:
            os.close(fd)
        return original(self, engine)

    monkeypatch.setattr(wal.Checkpoints, "after_write", spy)
    write_events(db, platform, batch(10, 0), lessons)
    assert seen == [True]
