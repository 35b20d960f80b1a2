"""One engine per process, made on first use after any fork; SQLite tuned for several workers.

SQLite: WAL, a busy timeout, and `BEGIN IMMEDIATE` for write transactions (a deferred BEGIN
that reads then writes fails with "database is locked" under concurrent workers).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as SQLAlchemyTimeout
from sqlalchemy.orm import Session, sessionmaker


PING_BUSY_MS = 250


class DatabaseUnavailable(RuntimeError):
    """The database did not answer (locked past the busy timeout, or unreachable)."""

    retry_after = 2


class Database:
    def __init__(self, url: str, busy_timeout_ms: int = 5000):
        self.url = url
        self.busy_timeout_ms = busy_timeout_ms
        self._engine: Engine | None = None
        self._pid: int | None = None
        self._lock = threading.Lock()

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
                    self._pid = os.getpid()
        return self._engine

    def _create(self) -> Engine:
        if not self.is_sqlite:
            return create_engine(self.url, pool_pre_ping=True, pool_size=5, max_overflow=5, pool_timeout=5)
        ensure_sqlite_directory(self.url)
        engine = create_engine(
            self.url,
            connect_args={"timeout": self.busy_timeout_ms / 1000, "check_same_thread": False},
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
            cursor.close()

        @event.listens_for(engine, "begin")
        def _sqlite_begin(conn):
            immediate = conn.get_execution_options().get("sqlite_immediate", False)
            conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

        return engine

    def session(self) -> Session:
        """A session for reads (deferred BEGIN on SQLite)."""
        return sessionmaker(self.engine, expire_on_commit=False)()

    @contextmanager
    def write(self) -> Iterator[Session]:
        """A write transaction: `BEGIN IMMEDIATE` on SQLite, committed on success, else rolled back."""
        bind = self.engine.execution_options(sqlite_immediate=True) if self.is_sqlite else self.engine
        with Session(bind, expire_on_commit=False) as session:
            with session.begin():
                yield session

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
            raise DatabaseUnavailable(type(exc.orig).__name__ + ": " + str(exc.orig).splitlines()[0]) from exc
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
            raise DatabaseUnavailable(f"{type(exc).__name__}: {exc}") from exc
        finally:
            raw.close()

    def dispose(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None


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
