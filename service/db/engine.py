"""One engine per process, made on first use after any fork; SQLite tuned for several workers.

SQLite: WAL, a busy timeout, and `BEGIN IMMEDIATE` for write transactions (a deferred BEGIN
that reads then writes fails with "database is locked" under concurrent workers).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError, DisconnectionError
from sqlalchemy.exc import TimeoutError as SQLAlchemyTimeout
from sqlalchemy.orm import Session

from .wal import Checkpoints

PING_BUSY_MS = 250
PROBE_SECONDS = 1.0  # /readyz's write probe, at most once this often per process
PROBE_BYTES = 16384  # its row: more than a page, so it needs room
SQLITE_CACHE_KIB = 65536  # page cache per connection (SQLite counts negative sizes in KiB)


def _json_dumps(value) -> str:
    return orjson.dumps(value).decode()


class DatabaseUnavailable(RuntimeError):
    """The database did not answer (locked past the busy timeout, or unreachable)."""

    retry_after = 2


class Database:
    def __init__(self, url: str, busy_timeout_ms: int = 5000):
        self.url = url
        self.busy_timeout_ms = busy_timeout_ms
        self._probed_at = -PROBE_SECONDS
        self._probe_failure: str | None = None
        self._engine: Engine | None = None
        self._reader: Engine
        self._writer: Engine
        path = url.split("///", 1)[-1] if url.startswith("sqlite") else ""
        self.sqlite_file = path if path and path != ":memory:" else None  # None: in memory, or a server
        self._lock_path = f"{path}.writers.lock" if self.sqlite_file else None
        self._pid: int | None = None
        self._lock = threading.Lock()
        self._process_writer = threading.Lock()  # this process's writers, one at a time
        self._checkpoints = Checkpoints()

    @property
    def is_sqlite(self) -> bool:
        return self.url.startswith("sqlite")

    @property
    def engine(self) -> Engine:
        if self._engine is None or self._pid != os.getpid():
            with self._lock:
                if self._engine is None or self._pid != os.getpid():
                    if self._engine is not None:
                        self._engine.dispose(close=False)  # the parent's connections stay the parent's
                    self._engine = self._create()
                    self._process_writer = threading.Lock()  # a parent's holder is not here
                    self._checkpoints = Checkpoints()
                    self._reader = (
                        self._engine if self.is_sqlite else self._engine.execution_options(isolation_level="AUTOCOMMIT")
                    )
                    self._writer = (
                        self._engine.execution_options(sqlite_immediate=True) if self.is_sqlite else self._engine
                    )
                    self._pid = os.getpid()
        return self._engine

    @property
    def reader(self) -> Engine:
        """The engine reads use: autocommit on PostgreSQL (each statement its own snapshot)."""
        self.engine  # noqa: B018  # made (or remade after a fork) on first use
        return self._reader

    @property
    def writer(self) -> Engine:
        """The engine writes use: `BEGIN IMMEDIATE` on SQLite."""
        self.engine  # noqa: B018
        return self._writer

    def _create(self) -> Engine:
        json_options = {"json_serializer": _json_dumps, "json_deserializer": orjson.loads}
        if not self.is_sqlite:
            engine = create_engine(self.url, pool_size=5, max_overflow=5, pool_timeout=5, **json_options)
            _ping_when_rested(engine)
            return engine
        ensure_sqlite_directory(self.url)
        engine = create_engine(
            self.url,
            connect_args={"timeout": self.busy_timeout_ms / 1000, "check_same_thread": False},
            **json_options,
        )
        busy = self.busy_timeout_ms

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn, _record):
            dbapi_conn.isolation_level = None  # we emit BEGIN ourselves
            cursor = dbapi_conn.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute(f"PRAGMA busy_timeout={int(busy)}")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA wal_autocheckpoint=0")  # checkpoints run after the writers' turn (wal.py)
            cursor.execute(f"PRAGMA cache_size=-{SQLITE_CACHE_KIB}")  # the default 2 MB thrashes on random-key indexes
            cursor.close()

        @event.listens_for(engine, "begin")
        def _sqlite_begin(conn):
            immediate = conn.get_execution_options().get("sqlite_immediate", False)
            conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

        return engine

    @contextmanager
    def read(self) -> Iterator[Session]:
        """Reads (`snapshot` where they must agree with each other). On PostgreSQL each statement runs in
        autocommit: its own snapshot, and no BEGIN/ROLLBACK round trips; on SQLite a deferred transaction
        (WAL readers never wait)."""
        with Session(self.reader, expire_on_commit=False) as session:
            yield session

    @contextmanager
    def snapshot(self) -> Iterator[Session]:
        """Reads that must agree with each other: on PostgreSQL one REPEATABLE READ, read-only
        transaction; on SQLite `read()` is one transaction already."""
        if self.is_sqlite:
            with self.read() as session:
                yield session
            return
        engine = self.reader.execution_options(isolation_level="REPEATABLE READ", postgresql_readonly=True)
        with Session(engine, expire_on_commit=False) as session, session.begin():
            yield session

    @contextmanager
    def write(self) -> Iterator[Session]:
        """Writes: one transaction per user action, committed on success, else rolled
        back (`BEGIN IMMEDIATE` behind the writers' queue on SQLite). Hot paths run Core statements
        on `session.connection()` inside it, or take `write_statement` (PostgreSQL) and
        `sqlite_transaction` (SQLite), a single call each."""
        with self._writers_queue(), Session(self.writer, expire_on_commit=False) as session:
            with session.begin():
                yield session

    def takes_writes(self) -> None:
        """DatabaseUnavailable unless the database takes a write that needs room: a page-sized row
        written and deleted in one committed transaction, which a full disk, a database at its size
        limit or a read-only one refuses as it refuses events (a busy one is still ready: it takes
        writes, in turn). Asked at most once a PROBE_SECONDS per process; between, the last answer
        stands, so /readyz cannot be made to write more often than that."""
        now = time.monotonic()
        if now - self._probed_at >= PROBE_SECONDS:
            self._probed_at = now
            self._probe_failure = self._probe()
        if self._probe_failure:
            raise DatabaseUnavailable(self._probe_failure)

    def free_bytes(self) -> int | None:
        """Free space where the SQLite file lives (None: a server's, which its write probe speaks for)."""
        if self.sqlite_file is None:
            return None
        return shutil.disk_usage(os.path.dirname(os.path.abspath(self.sqlite_file)) or ".").free

    def _probe(self) -> str | None:
        key = os.urandom(16).hex()
        try:
            with self.write() as session:
                filler = os.urandom(PROBE_BYTES // 2).hex()  # not compressible away (PostgreSQL's TOAST)
                session.execute(text("INSERT INTO write_probe (id, filler) VALUES (:id, :f)"), {"id": key, "f": filler})
                session.execute(text("DELETE FROM write_probe WHERE id = :id"), {"id": key})
        except (DBAPIError, sqlite3.Error, DatabaseUnavailable) as exc:
            cause = getattr(exc, "orig", None) or exc
            said = (str(cause).splitlines() or [""])[0]
            if any(m in said.lower() for m in ("locked", "busy")):
                return None
            return f"writes are failing ({said})"  # the driver's words, never its class names
        return None

    @contextmanager
    def write_statement(self) -> Iterator[Connection]:
        """PostgreSQL: a write that is a single statement (a function call doing the whole
        action), run in autocommit: the statement its own transaction, one round trip with no
        BEGIN or COMMIT. SQLite's single-call writes use `sqlite_transaction`."""
        assert not self.is_sqlite, "SQLite writes: write() or sqlite_transaction()"
        with self.reader.connect() as conn:  # autocommit
            yield conn

    @contextmanager
    def sqlite_transaction(self) -> Iterator[sqlite3.Connection]:
        """SQLite's hot-path write: the driver's own connection in a `BEGIN IMMEDIATE` transaction
        behind the writers' queue, committed on success (no SQLAlchemy connection or transaction
        objects: a third of a single event's write). A busy or failing database is
        `DatabaseUnavailable`, as it is through SQLAlchemy."""
        with self._writers_queue():
            pooled = self.engine.raw_connection()
            try:
                raw = pooled.driver_connection
                assert isinstance(raw, sqlite3.Connection)
                try:
                    raw.execute("BEGIN IMMEDIATE")
                    try:
                        yield raw
                    except BaseException:
                        raw.execute("ROLLBACK")
                        raise
                    raw.execute("COMMIT")
                except sqlite3.OperationalError as exc:
                    raise DatabaseUnavailable(str(exc)) from exc
            finally:
                pooled.close()

    @contextmanager
    def _writers_queue(self) -> Iterator[None]:
        """SQLite: take turns before `BEGIN IMMEDIATE`, first among this process's threads (a plain
        lock: waiting threads sleep until it is free), then among processes on a lock file.

        SQLite's own busy handler sleeps 1, 2, 5, 10 ... ms between retries, so a writer that
        collides with another one waits milliseconds for a lock held for microseconds. One
        thread per process polls the lock file at sub-millisecond steps instead (every waiting
        thread polling it cost more CPU than the writes); a lock held by anyone else (another
        program) still meets the busy timeout as before.
        """
        if self._lock_path is None:
            yield
            return
        self.engine  # noqa: B018  # after a fork: this process's own lock (see `engine`)
        deadline = time.monotonic() + self.busy_timeout_ms / 1000
        if not self._process_writer.acquire(timeout=self.busy_timeout_ms / 1000):
            raise DatabaseUnavailable("another writer held the database past the busy timeout")
        try:
            fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                delay = 0.00005
                while True:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        if time.monotonic() > deadline:
                            raise DatabaseUnavailable(
                                "another writer held the database past the busy timeout"
                            ) from None
                        time.sleep(delay)
                        delay = min(delay * 2, 0.0005)
                yield
            finally:
                os.close(fd)  # closing the descriptor releases the lock
        finally:
            self._process_writer.release()
        self._checkpoints.after_write(self.engine, self._writers_queue)  # outside the turn: nobody waits for it

    def ping(self) -> None:
        """The database answers and, on SQLite, a writer could start now (no lock held past
        a short wait): readiness means events can be stored, not just read."""
        if self.is_sqlite:
            self._ping_sqlite_writer()
            return
        try:
            with self.engine.connect() as conn:
                conn.execute(text("SELECT 1"))
        except DBAPIError as exc:
            raise DatabaseUnavailable((str(exc.orig).splitlines() or ["the database did not answer"])[0]) from exc
        except SQLAlchemyTimeout as exc:
            raise DatabaseUnavailable("no database connection became free in time") from exc

    def _ping_sqlite_writer(self) -> None:
        raw = self.engine.raw_connection()  # the driver's connection: we manage BEGIN ourselves
        try:
            cursor = raw.cursor()
            cursor.execute(f"PRAGMA busy_timeout={PING_BUSY_MS}")
            try:
                cursor.execute("BEGIN IMMEDIATE")
                cursor.execute("ROLLBACK")
            finally:
                cursor.execute(f"PRAGMA busy_timeout={int(self.busy_timeout_ms)}")
                cursor.close()
        except sqlite3.Error as exc:
            raise DatabaseUnavailable(str(exc)) from exc
        finally:
            raw.close()

    def dispose(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None


RESTED_SECONDS = 1.0  # a pooled connection unused this long is pinged before use


def _ping_when_rested(engine: Engine) -> None:
    """Pessimistic disconnect handling for connections that have rested, not on every checkout:
    the busy path saves `pool_pre_ping`'s round trip. If the server goes away within a second of a
    connection's last use, the one request that meets it fails (503, Retry-After) and SQLAlchemy
    drops every pooled connection of that server (a disconnect invalidates the pool)."""

    @event.listens_for(engine, "checkin")
    def _rested_from(_dbapi_conn, record):
        record.info["checked_in"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _ping(dbapi_conn, record, _proxy):
        if time.monotonic() - record.info.get("checked_in", 0.0) < RESTED_SECONDS:
            return
        try:
            engine.dialect.do_ping(dbapi_conn)  # outside a transaction (autocommit while it pings)
        except Exception as exc:  # any driver error: the pool discards it and connects anew
            raise DisconnectionError(str(exc)) from exc


def ensure_sqlite_directory(url: str) -> None:
    """SQLite creates the file but not its folder (the default lives under var/)."""
    if url.startswith("sqlite"):
        path = url.split("///", 1)[-1]
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)


def init_app(app) -> Database:
    settings = app.extensions["settings"]
    db = Database(settings.database_url, settings.sqlite_busy_timeout_ms)
    app.extensions["db"] = db
    return db
