"""The event log by month, and retention.

PostgreSQL keeps `events` in monthly partitions of `stored_at` (migration 0007): a query over a
time range reads only its months, an index on time costs a few pages (BRIN: rows arrive in
time order), and retention drops whole months instead of deleting rows. A month is
`events_YYYY_MM`, holding [its first day, the next month's first day) in UTC; `events_default`
takes what no month holds (maintenance not run for months, a clock far off) and `maintain`
moves such rows into their month. SQLite keeps one table; retention deletes rows there.

Retention never takes an event the rollups have not counted: a month past retention whose
newest id is above the rollups' watermark is kept until a refresh has passed it.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field

from sqlalchemy import delete, select, text
from sqlalchemy.engine import Connection

from . import quotas
from .analytics.rollups import watermark
from .engine import Database
from .tables import Event, Platform, cast_table

AHEAD = 3  # months made ahead of the current one
DELETE_CHUNK = 10_000  # SQLite rows deleted per transaction
MONTH_NAME = re.compile(r"\Aevents_(\d{4})_(\d{2})\Z")


@dataclass
class Maintenance:
    created: list[str] = field(default_factory=list)  # partitions made
    moved: int = 0  # rows moved out of the default partition into their month
    dropped: list[str] = field(default_factory=list)  # partitions dropped by retention
    deleted: int = 0  # rows deleted by retention (SQLite, or PostgreSQL's default partition)
    held: list[str] = field(default_factory=list)  # past retention but not yet rolled up: kept
    usage_windows: int = 0  # storage quota windows that had ended, deleted


def month_of(at: dt.datetime) -> dt.date:
    """The first day of `at`'s month in UTC."""
    at = at.astimezone(dt.UTC)
    return dt.date(at.year, at.month, 1)


def add_months(month: dt.date, n: int) -> dt.date:
    index = month.year * 12 + month.month - 1 + n
    return dt.date(index // 12, index % 12 + 1, 1)


def partition_name(month: dt.date) -> str:
    return f"events_{month:%Y_%m}"


def _bound(month: dt.date) -> str:
    return f"'{month.isoformat()} 00:00:00+00'"  # a date we made: safe to inline in DDL


def months(conn: Connection) -> list[dt.date]:
    """The monthly partitions `events` has, oldest first."""
    names = conn.execute(
        text(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = 'events'::regclass"
        )
    ).scalars()
    found = [MONTH_NAME.match(n) for n in names]
    return sorted(dt.date(int(m[1]), int(m[2]), 1) for m in found if m)


def create_month(conn: Connection, month: dt.date) -> None:
    """Make `month`'s partition (its indexes come from the parent's)."""
    conn.execute(
        text(
            f"CREATE TABLE {partition_name(month)} PARTITION OF events "
            f"FOR VALUES FROM ({_bound(month)}) TO ({_bound(add_months(month, 1))})"
        )
    )


def span(first: dt.date, last: dt.date) -> list[dt.date]:
    """Every month from `first` to `last`."""
    count = (last.year - first.year) * 12 + last.month - first.month
    return [add_months(first, k) for k in range(count + 1)]


def make_months(conn: Connection, wanted: list[dt.date]) -> tuple[list[str], int]:
    """Make each wanted month that is missing, and each month the default partition holds rows
    of, moving those rows into it; (the partitions made, the rows moved)."""
    have, stray = set(months(conn)), set(_default_months(conn))
    made, moved = [], 0
    for month in sorted((set(wanted) | stray) - have):
        if month in stray:
            moved += _adopt(conn, month)
        else:
            create_month(conn, month)
        made.append(partition_name(month))
    return made, moved


def _default_months(conn: Connection) -> list[dt.date]:
    rows = conn.execute(
        text("SELECT DISTINCT date_trunc('month', stored_at AT TIME ZONE 'UTC')::date FROM events_default")
    ).scalars()
    return sorted(rows)


def _adopt(conn: Connection, month: dt.date) -> int:
    """Make `month`'s partition although the default one holds rows of it: detach the default,
    make the month, move its rows, attach the default again (one transaction, so writers
    wait a moment and nothing is lost)."""
    conn.execute(text("ALTER TABLE events DETACH PARTITION events_default"))
    create_month(conn, month)
    within = f"stored_at >= {_bound(month)} AND stored_at < {_bound(add_months(month, 1))}"
    moved = conn.execute(
        text(f"WITH m AS (DELETE FROM events_default WHERE {within} RETURNING *) INSERT INTO events SELECT * FROM m")
    )
    conn.execute(text("ALTER TABLE events ATTACH PARTITION events_default DEFAULT"))
    return int(moved.rowcount)


def maintain(db: Database, keep_months: int = 0, now: dt.datetime | None = None) -> Maintenance:
    """Delete the storage quotas' ended windows, make the months up to AHEAD ahead (and any the
    default partition has rows of), then apply retention: with `keep_months` > 0, events stored
    before the first day of the month `keep_months` before the current one go (so at least
    `keep_months` whole months stay)."""
    current = month_of(now or dt.datetime.now(dt.UTC))
    done = Maintenance()
    with db.write() as session:
        done.usage_windows = quotas.prune(session.connection(), (now or dt.datetime.now(dt.UTC)).timestamp())
    if not db.is_sqlite:
        with db.write() as session:
            conn = session.connection()
            done.created, done.moved = make_months(conn, span(current, add_months(current, AHEAD)))
    if keep_months > 0:
        cutoff = add_months(current, -keep_months)
        (_delete_before if db.is_sqlite else _drop_before)(db, cutoff, done)
    return done


def _drop_before(db: Database, cutoff: dt.date, done: Maintenance) -> None:
    """PostgreSQL: drop each month that ends by `cutoff` once the rollups hold all of it."""
    with db.write() as session:
        conn = session.connection()
        rolled = watermark(conn)
        for month in months(conn):
            if add_months(month, 1) > cutoff:
                break
            name = partition_name(month)
            newest = conn.execute(text(f"SELECT max(id) FROM {name}")).scalar() or 0
            if newest > rolled:
                done.held.append(name)
                continue
            conn.execute(text(f"DROP TABLE {name}"))
            done.dropped.append(name)
        gone = conn.execute(
            text("DELETE FROM events_default WHERE stored_at < :cutoff AND id <= :rolled"),
            {"cutoff": _midnight(cutoff), "rolled": rolled},
        )
        done.deleted += int(gone.rowcount)


def _delete_before(db: Database, cutoff: dt.date, done: Maintenance) -> None:
    """SQLite: delete events stored before `cutoff` that the rollups hold, a chunk per
    transaction, platform by platform (the (platform, stored_at) index finds them)."""
    events = cast_table(Event)
    with db.read() as session:
        platforms = list(session.scalars(select(Platform.id)))
    for platform_id in platforms:
        while True:
            with db.write() as session:
                conn = session.connection()
                oldest = (
                    select(events.c.id)
                    .where(
                        events.c.platform_id == platform_id,
                        events.c.stored_at < _midnight(cutoff),
                        events.c.id <= watermark(conn),
                    )
                    .limit(DELETE_CHUNK)
                )
                gone = int(conn.execute(delete(events).where(events.c.id.in_(oldest))).rowcount)
            done.deleted += gone
            if gone < DELETE_CHUNK:
                break


def retention_cutoff(keep_months: int, now: dt.datetime | None = None) -> dt.datetime:
    """Events stored before this go under retention: the first moment of the month `keep_months`
    before the current one."""
    return _midnight(add_months(month_of(now or dt.datetime.now(dt.UTC)), -keep_months))


def _midnight(month: dt.date) -> dt.datetime:
    return dt.datetime(month.year, month.month, 1, tzinfo=dt.UTC)
