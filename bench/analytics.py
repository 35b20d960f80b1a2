"""Analytics over 1,000,000 events: funnel, durations, time series, on SQLite (and PostgreSQL
when WORKBENCH_BENCH_DATABASE_URL is set). Budget: < 200 ms each, median of several calls
through the API (in process, no network). The cohort is `workbench demo-data`'s, so drop-off,
timings and parameters look like real use.

    python bench/analytics.py [--events 1000000] [--json]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from sqlalchemy import text

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.common import emit, fresh_schema  # noqa: E402
from service.app import create_app  # noqa: E402
from service.db import Database  # noqa: E402
from service.db.platforms import create_key  # noqa: E402
from service.demo import load  # noqa: E402
from service.lessons import load_lessons  # noqa: E402

BUDGET_MS = 200
EVENTS_PER_LEARNER = 8.8  # what the demo cohort averages (938,503 events from 106,382 learners)
LESSON = "multi-head-attention"


def populate(url: str, events: int) -> str:
    fresh_schema(url)
    db = Database(url)
    learners = int(events / EVENTS_PER_LEARNER)
    started = time.monotonic()
    done = [0]

    def progress(n: int) -> None:
        done[0] += n
        if done[0] % 10000 == 0:
            print(f"  {done[0]}/{learners} learners ({time.monotonic() - started:.0f} s)", file=sys.stderr, flush=True)

    counts = load(
        db, load_lessons("content/lessons"), learners, seed=42, platform="bench", batch=2000, progress=progress
    )
    with db.write() as session:
        key, _ = create_key(session, "bench", frozenset({"analytics:read"}))
    with db.read() as conn:
        total = conn.execute(text("SELECT count(*) FROM events")).scalar_one()
    # What autovacuum does to a live database: statistics and the visibility map (index-only scans).
    with db.engine.execution_options(isolation_level="AUTOCOMMIT").connect() as conn:
        conn.exec_driver_sql("VACUUM ANALYZE" if url.startswith("postgresql") else "ANALYZE")
    db.dispose()
    print(f"  stored {counts['events_created']} events ({total} in the table)", file=sys.stderr, flush=True)
    return key.token


def measure(url: str, backend: str, token: str, repeats: int = 7) -> list[dict]:
    app = create_app({"env": "testing", "database_url": url, "ratelimit_enabled": False})
    client = app.test_client()
    headers = {"Authorization": f"Bearer {token}"}
    with app.extensions["db"].read() as conn:
        total = conn.execute(text("SELECT count(*) FROM events")).scalar_one()
    results = []
    for name, path in (
        ("funnel", f"/api/v1/analytics/lessons/{LESSON}/funnel"),
        ("durations", f"/api/v1/analytics/lessons/{LESSON}/durations"),
        ("timeseries (day x event)", "/api/v1/analytics/events/timeseries?bucket=day&group_by=event"),
    ):
        assert client.get(path, headers=headers).status_code == 200
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            response = client.get(path, headers=headers)
            times.append((time.perf_counter() - start) * 1000)
            assert response.status_code == 200
        ms = statistics.median(times)
        results.append(
            {
                "name": f"analytics {name}, {total:,} events, {backend}",
                "figure": round(ms, 1),
                "unit": "ms (median)",
                "baseline": "budget",
                "baseline_figure": BUDGET_MS,
                "ratio": round(ms / BUDGET_MS, 2),
                "budget": f"< {BUDGET_MS} ms",
                "ok": ms < BUDGET_MS,
            }
        )
    app.extensions["db"].dispose()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    targets = [("SQLite", f"sqlite:///{Path(tempfile.mkdtemp(prefix='bench-analytics-')) / 'a.db'}")]
    if os.environ.get("WORKBENCH_BENCH_DATABASE_URL"):
        targets.append(("PostgreSQL", os.environ["WORKBENCH_BENCH_DATABASE_URL"]))
    for backend, url in targets:
        print(f"== populating {backend} with {args.events:,} events", file=sys.stderr, flush=True)
        token = populate(url, args.events)
        for result in measure(url, backend, token):
            emit(result, args.json)


if __name__ == "__main__":
    main()
