"""The analytics store on ClickHouse (chDB, in this process) against the SQL stores it copies, in
one run: the same events (bench/analytics.py's cohort, copied up to the size asked) in SQLite (and
PostgreSQL when WORKBENCH_BENCH_DATABASE_URL is set), synced to ClickHouse by the service's own
sync; then bytes on disk, the sync's throughput, and every analytics endpoint's median through the
API from each store. Budgets: every endpoint under 100 ms from ClickHouse at 10M events (issue
16's budget for the SQL store); the sync at least 10,000 events a second (a hundred times the
100 events a second a busy platform writes, so a backlog clears); ClickHouse's bytes are compared
with the SQL store's (data, indexes and rollups).

    python bench/clickhouse.py [--events 10000000] [--backends sqlite,postgresql] [--json]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

from sqlalchemy import text

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.analytics import REPEATS, catch_up, medians, original, populate, scale  # noqa: E402
from bench.common import emit  # noqa: E402
from service.app import create_app  # noqa: E402
from service.db import Database  # noqa: E402
from service.db.clickhouse import ClickHouse  # noqa: E402
from service.db.clickhouse.schema import migrate  # noqa: E402
from service.db.clickhouse.sync import sync  # noqa: E402

BUDGET_MS = 100
SYNC_BUDGET = 10_000  # events a second
CHDB_DIR = tempfile.mkdtemp(prefix="bench-chdb-")  # one directory per process (chDB)


def sql_bytes(url: str) -> int:
    if url.startswith("sqlite"):
        path = Path(url.removeprefix("sqlite:///"))
        return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
    db = Database(url)
    with db.read() as conn:
        size = conn.execute(text("SELECT pg_database_size(current_database())")).scalar_one()
    db.dispose()
    return int(size)


def ch_bytes(store: ClickHouse) -> int:
    store.command("OPTIMIZE TABLE {db}.events FINAL")  # what the background merges reach in time
    found = store.rows(
        "SELECT sum(bytes_on_disk) FROM system.parts WHERE database = {d:String} AND active", d=store.database
    )
    return int(found[0][0])


def row(name: str, figure: float, unit: str, baseline: str, base: float, budget: str, ok: bool) -> dict:
    ratio = round(figure / base, 3) if base else None
    return {
        "name": name,
        "figure": round(figure, 1),
        "unit": unit,
        "baseline": baseline,
        "baseline_figure": round(base, 1),
        "ratio": ratio,
        "budget": budget,
        "ok": ok,
    }


def compare(backend: str, url: str, token: str, total: int, as_json: bool) -> None:
    store = ClickHouse(f"chdb://{CHDB_DIR}?database=b{uuid.uuid4().hex[:8]}")
    migrate(store)
    db = Database(url)
    started = time.monotonic()
    copied = sync(db, store)
    took = time.monotonic() - started
    db.dispose()
    rate = copied["events"] / took
    print(f"  synced {copied['events']:,} events in {took:.0f} s", file=sys.stderr, flush=True)
    emit(
        row(
            f"analytics sync to ClickHouse, {total:,} events from {backend} (whole log, one pass)",
            rate,
            "events/s",
            "budget",
            SYNC_BUDGET,
            f">= {SYNC_BUDGET:,}/s",
            rate >= SYNC_BUDGET,
        ),
        as_json,
    )
    on_disk, in_sql = ch_bytes(store) / 1e6, sql_bytes(url) / 1e6
    emit(
        row(
            f"analytics bytes on disk, {total:,} events: ClickHouse against {backend} (data, indexes, rollups)",
            on_disk,
            "MB",
            f"{backend} MB",
            in_sql,
            "smaller than the SQL store",
            on_disk < in_sql,
        ),
        as_json,
    )
    settings = {"env": "testing", "database_url": url, "ratelimit_enabled": False}
    sql_app = create_app(settings)
    ch_app = create_app({**settings, "analytics_url": store._url})
    sql_times = {name: (ms, p95) for name, ms, p95 in medians(sql_app, token)}
    for name, ms, p95 in medians(ch_app, token):
        base = sql_times[name][0]
        emit(
            row(
                f"analytics {name}, {total:,} events, ClickHouse (chDB; p95 {p95:.1f} ms) against {backend}",
                ms,
                f"ms (median of {REPEATS})",
                f"{backend} ms",
                base,
                f"< {BUDGET_MS} ms",
                ms < BUDGET_MS,
            ),
            as_json,
        )
    sql_app.extensions["db"].dispose()
    ch_app.extensions["db"].dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000_000, help="a multiple of 1,000,000")
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    targets = []
    if "sqlite" in args.backends:
        targets.append(("SQLite", f"sqlite:///{Path(tempfile.mkdtemp(prefix='bench-ch-')) / 'a.db'}"))
    if "postgresql" in args.backends and os.environ.get("WORKBENCH_BENCH_DATABASE_URL"):
        targets.append(("PostgreSQL", os.environ["WORKBENCH_BENCH_DATABASE_URL"]))
    first = min(args.events, 1_000_000)
    for backend, url in targets:
        print(f"== populating {backend} with {first:,} events", file=sys.stderr, flush=True)
        token = populate(url, first)
        copies = args.events // first - 1
        if copies:
            scale(url, original(url), 1, copies)
        catch_up(url)
        db = Database(url)
        with db.read() as conn:
            total = conn.execute(text("SELECT count(*) FROM events")).scalar_one()
        db.dispose()
        compare(backend, url, token, total, args.json)


if __name__ == "__main__":
    main()
