"""SQLite's WAL is copied back into the database file after a writer's turn, not inside it
(service/db/wal.py), so writers do not wait for checkpoints; past a bound, one checkpoint takes
a writers' turn, so the WAL file stays bounded under writers that never pause."""

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

    def spy(self, engine, writers_turn):
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
        return original(self, engine, writers_turn)

    monkeypatch.setattr(wal.Checkpoints, "after_write", spy)
    write_events(db, platform, batch(10, 0), lessons)
    assert seen == [True]


def test_under_writers_that_never_pause_the_wal_file_stays_bounded(database, monkeypatch):
    # A checkpoint running beside the writers never catches up with them, so the WAL is never
    # restarted and its file grows with every write (800 MB in 8 s of ingest). Past the bound a
    # checkpoint takes a writers' turn: it finishes, and the file starts over from empty.
    import threading

    db, path, platform, lessons = database
    monkeypatch.setattr(wal, "EVERY", 0.0)
    monkeypatch.setattr(wal, "LIMIT_FRAMES", 400)
    write_events(db, platform, batch(200, 0), lessons)
    one_write = wal_frames(path)
    errors = []

    def writer(k: int) -> None:
        try:
            for i in range(20):
                write_events(db, platform, batch(200, (k * 20 + i + 1) * 200), lessons)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    page = sqlite3.connect(path).execute("PRAGMA page_size").fetchone()[0]
    frames_in_file = os.path.getsize(f"{path}-wal") // (page + 24)  # each frame: a 24-byte header and a page
    assert frames_in_file < wal.LIMIT_FRAMES + 8 * one_write  # 80 writes of at least `one_write` frames each
    with sqlite3.connect(path) as plain:
        assert plain.execute("SELECT count(*) FROM events").fetchone()[0] == 200 * 81
