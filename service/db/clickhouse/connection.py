"""One way to talk to ClickHouse, whichever runs it: a server or cluster over HTTP
(`clickhouse://user:password@host:8123/database`, clickhouse-connect) or ClickHouse's engine in
this process (`chdb:///path/to/directory?database=name`, chDB). Both take the same SQL with
server-side parameters (`{name:Type}`) and answer rows as JSONCompact, read the same way."""

from __future__ import annotations

import datetime as dt
import json
import re
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import orjson

from ..engine import DatabaseUnavailable

NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
# path -> (session, its lock): chDB opens a directory once per process, and its session takes one
# statement at a time.
_CHDB: dict[str, tuple[Any, threading.Lock]] = {}
_CHDB_LOCK = threading.Lock()


class AnalyticsUnavailable(DatabaseUnavailable):
    """The analytics store cannot be reached or refused a statement: to a client, like the primary
    database out of reach (a 503 saying to try again; the message is the operator's, in the log)."""


def moment(value: dt.datetime) -> str:
    """A UTC time as DateTime64(6, 'UTC') text, microseconds kept."""
    return value.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


def _time(value: str | None) -> dt.datetime | None:
    return None if value is None else dt.datetime.fromisoformat(value).replace(tzinfo=dt.UTC)


def _integer(value: str | int | None) -> int | None:
    return None if value is None else int(value)


def _reader(kind: str) -> Callable[[Any], Any] | None:
    """How a JSONCompact column reads as Python (None: as it is): 64-bit integers come quoted,
    times as UTC text."""
    inner = kind.removeprefix("Nullable(").removesuffix(")") if kind.startswith("Nullable(") else kind
    if inner.startswith("DateTime"):
        return _time
    if re.match(r"^U?Int(64|128|256)$", inner):
        return _integer
    return None


class ClickHouse:
    """A connection and the database its tables live in."""

    def __init__(self, url: str):
        parts = urlsplit(url)
        self.kind = parts.scheme
        if self.kind == "chdb":
            self.database = parse_qs(parts.query).get("database", ["workbench"])[0]
            self._path = parts.path
        elif self.kind in ("clickhouse", "clickhouses"):
            self.database = parts.path.strip("/") or "default"
        else:
            raise ValueError(f"analytics URL must start with clickhouse:// or chdb://, not {parts.scheme!r}")
        if not NAME.match(self.database):
            raise ValueError(f"not a ClickHouse database name: {self.database!r}")
        self._url = url
        self._client: Any = None
        self._lock = threading.Lock()

    def _connect(self) -> Any:
        if self._client is None:
            if self.kind == "chdb":
                from chdb import session

                with _CHDB_LOCK:
                    if self._path not in _CHDB:
                        _CHDB[self._path] = (session.Session(self._path), threading.Lock())
                    self._client, self._lock = _CHDB[self._path]
            else:
                import clickhouse_connect

                # No default database: every statement names `{db}`, which `migrate` creates.
                parts, secure = urlsplit(self._url), self.kind == "clickhouses"
                self._client = clickhouse_connect.get_client(
                    host=parts.hostname or "localhost",
                    port=parts.port or (8443 if secure else 8123),
                    username=unquote(parts.username or "default"),
                    password=unquote(parts.password or ""),
                    secure=secure,
                )
        return self._client

    def _run(self, sql: str, params: dict[str, Any], fmt: str = "JSONCompact") -> bytes:
        try:
            client = self._connect()
            if self.kind == "chdb":
                from clickhouse_connect.driver.binding import format_bind_value

                text = {k: format_bind_value(v) for k, v in params.items()}
                with self._lock:
                    return client.query(sql, fmt, params=text).bytes()
            return client.raw_query(sql, parameters=params, fmt=fmt)
        except ImportError as error:
            raise AnalyticsUnavailable(
                f"the analytics store needs {error.name} (pip install '.[clickhouse]')"
            ) from error
        except Exception as error:  # the drivers' own errors: a failed query is the store's failure
            raise AnalyticsUnavailable(f"ClickHouse: {str(error).splitlines()[0][:500]}") from error

    def rows(self, sql: str, **params: Any) -> list[tuple]:
        """The answer's rows, typed as Python values (`{db}` in the SQL is the database)."""
        raw = self._run(sql.replace("{db}", self.database), params)
        if not raw.strip():
            return []
        answer = orjson.loads(raw)
        readers = [(i, r) for i, column in enumerate(answer["meta"]) if (r := _reader(column["type"]))]
        if not readers:
            return [tuple(row) for row in answer["data"]]
        found = []
        for row in answer["data"]:
            for i, read in readers:
                row[i] = read(row[i])
            found.append(tuple(row))
        return found

    def command(self, sql: str, **params: Any) -> None:
        self._run(sql.replace("{db}", self.database), params, fmt="TabSeparated")

    def insert(self, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]], token: str = "") -> int:
        """Insert rows (datetimes as UTC) as JSONEachRow; how many. With `token`, the same
        insert made again is skipped, and so are the views it feeds."""
        lines = [
            json.dumps({c: (moment(v) if isinstance(v, dt.datetime) else v) for c, v in zip(columns, row, strict=True)})
            for row in rows
        ]
        if not lines:
            return 0
        body = "\n".join(lines)
        settings = {"insert_deduplication_token": token, "deduplicate_blocks_in_dependent_materialized_views": 1}
        if self.kind == "chdb":
            said = ", ".join(f"{k} = {v!r}" for k, v in settings.items()) if token else ""
            into = f"INSERT INTO {self.database}.{table} {'SETTINGS ' + said if said else ''} FORMAT JSONEachRow"
            self._run(f"{into}\n{body}", {}, fmt="TabSeparated")
            return len(lines)
        try:
            self._connect().raw_insert(
                f"{self.database}.{table}",
                list(columns),
                body.encode(),
                fmt="JSONEachRow",
                settings=settings if token else None,
            )
        except Exception as error:  # the driver's own errors, as in _run
            raise AnalyticsUnavailable(f"ClickHouse: {str(error).splitlines()[0][:500]}") from error
        return len(lines)
