"""Every analytics endpoint at 1,000,000 and 10,000,000 events, on SQLite (and PostgreSQL when
WORKBENCH_BENCH_DATABASE_URL is set). Budget (issue 16): under 50 ms at 1M and under 100 ms at
10M, judged on the median of 20 calls through the API (in process, no network); the p95 is
reported beside it. The first million is `workbench demo-data`'s cohort, so drop-off, timings
and parameters look like real use; each further million is a copy of it under other learner
and event ids (the same days, ten times the learners), then the rollups catch up.

    python bench/analytics.py [--events 1000000,10000000] [--json]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from sqlalchemy import delete, text

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.common import emit, fresh_schema  # noqa: E402
from service.app import create_app  # noqa: E402
from service.db import Database  # noqa: E402
from service.db.analytics.mistake_rollups import backfill  # noqa: E402
from service.db.analytics.rollup_refresh import refresh  # noqa: E402
from service.db.platforms import create_key  # noqa: E402
from service.db.tables import MistakeLearner, MistakeRollup  # noqa: E402
from service.demo import load  # noqa: E402
from service.lessons import load_lessons  # noqa: E402

BUDGETS_MS = {1_000_000: 50, 10_000_000: 100}
REPEATS = 20
EVENTS_PER_LEARNER = 18.7  # what the demo cohort averages since it answers the items (5,624 from 300 learners)
LESSON = "multi-head-attention"


def populate(url: str, events: int) -> str:
    fresh_schema(url)
    db = Database(url)
    learners = int(events / EVENTS_PER_LEARNER)
    started = time.monotonic()
    done = [0]

    def progress(n: int) -> None:
        done[0] += n
        if done[0] == 2000 and url.startswith("postgresql"):
            # Planned on an empty table's statistics, PostgreSQL's ingest grew slower with every
            # batch: 600 s per 10,000 learners here by the 30,000th, 50 s once analysed.
            with db.engine.execution_options(isolation_level="AUTOCOMMIT").connect() as conn:
                conn.exec_driver_sql("ANALYZE")
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


def original(url: str) -> dict[str, int]:
    """The last id of each copied table before any copy."""
    db = Database(url)
    with db.read() as conn:
        tops = {t: conn.execute(text(f"SELECT max(id) FROM {t}")).scalar_one() for t in COPIED}
    db.dispose()
    return tops


def scale(url: str, tops: dict[str, int], first: int, last: int) -> None:
    """Add copies `first` to `last` of the original rows, each under its own learner and event ids."""
    db = Database(url)
    started = time.monotonic()
    for n in range(first, last + 1):
        tag, suffix = f"~{n}", f"{n:06d}"
        with db.write() as session:
            for table, sql in COPIED.items():
                session.execute(text(sql), {"tag": tag, "suffix": suffix, "top": tops[table]})
            if not db.is_sqlite:  # the copies' ids claimed, as ingest claims them (migration 0007)
                session.execute(text(CLAIMED), {"suffix": suffix, "top": tops["events"]})
        print(f"  copy {n}/{last} ({time.monotonic() - started:.0f} s)", file=sys.stderr, flush=True)
    with db.write() as session:  # the copies' checks, counted as the service counts them
        session.execute(delete(MistakeLearner))
        session.execute(delete(MistakeRollup))
        backfill(session.connection())
    with db.engine.execution_options(isolation_level="AUTOCOMMIT").connect() as conn:
        conn.exec_driver_sql("VACUUM ANALYZE" if url.startswith("postgresql") else "ANALYZE")
    db.dispose()


COPIED = {
    "events": "INSERT INTO events (platform_id, event_id, learner, lesson, checkpoint, event, instance_id, item, data, "
    "occurred_at, stored_at, content_hash) SELECT platform_id, substr(event_id, 1, 30) || :suffix, learner || :tag, "
    "lesson, checkpoint, event, instance_id, item, data, occurred_at, stored_at, content_hash FROM events "
    "WHERE id <= :top",
    "learner_lessons": "INSERT INTO learner_lessons (platform_id, lesson, learner, first_event_at) SELECT platform_id, "
    "lesson, learner || :tag, first_event_at FROM learner_lessons WHERE id <= :top",
    "checkpoint_progress": "INSERT INTO checkpoint_progress (platform_id, learner, lesson, checkpoint, completed_at, "
    "event_id, seconds_from_start, verification) SELECT platform_id, learner || :tag, lesson, checkpoint, "
    "completed_at, substr(event_id, 1, 30) || :suffix, seconds_from_start, verification FROM checkpoint_progress "
    "WHERE id <= :top",
    "exercise_checks": 'INSERT INTO exercise_checks (platform_id, learner, lesson, "case", correct, max_abs_error, '
    'diagnosis, created_at) SELECT platform_id, learner || :tag, lesson, "case", correct, max_abs_error, diagnosis, '
    "created_at FROM exercise_checks WHERE id <= :top",
}
CLAIMED = (
    "INSERT INTO event_ids (platform_id, event_id, content_hash) SELECT platform_id, substr(event_id, 1, 30) || "
    ":suffix, content_hash FROM events WHERE id <= :top"
)


def catch_up(url: str) -> float:
    """Roll up everything stored (as `workbench rollups refresh` does); seconds taken."""
    db = Database(url)
    started = time.monotonic()
    moved = refresh(db, chunk=200_000)
    took = time.monotonic() - started
    print(f"  rolled up {moved:,} event ids in {took:.0f} s", file=sys.stderr, flush=True)
    db.dispose()
    return took


ENDPOINTS = (
    ("funnel", f"/api/v1/analytics/lessons/{LESSON}/funnel"),
    ("durations", f"/api/v1/analytics/lessons/{LESSON}/durations"),
    ("timeseries (day x event)", "/api/v1/analytics/events/timeseries?bucket=day&group_by=event"),
    (
        "timeseries (hour x checkpoint, one lesson)",
        f"/api/v1/analytics/events/timeseries?bucket=hour&group_by=checkpoint&lesson={LESSON}",
    ),
    ("parameters and token cells", f"/api/v1/analytics/lessons/{LESSON}/parameters"),
    ("mistakes", f"/api/v1/analytics/lessons/{LESSON}/mistakes"),
    ("learners (first page)", f"/api/v1/analytics/learners?lesson={LESSON}"),
    ("items (correct rates, discrimination, gain)", f"/api/v1/analytics/lessons/{LESSON}/items"),
)


def medians(app, token: str) -> list[tuple[str, float, float]]:
    """(endpoint, median ms, p95 ms) of REPEATS calls of each endpoint through `app`'s API."""
    client = app.test_client()
    headers = {"Authorization": f"Bearer {token}"}
    found = []
    for name, path in ENDPOINTS:
        assert client.get(path, headers=headers).status_code == 200
        times = []
        for _ in range(REPEATS):
            start = time.perf_counter()
            response = client.get(path, headers=headers)
            times.append((time.perf_counter() - start) * 1000)
            assert response.status_code == 200
        found.append((name, statistics.median(times), statistics.quantiles(times, n=20)[-1]))
    return found


def measure(url: str, backend: str, token: str, budget_ms: float) -> list[dict]:
    app = create_app({"env": "testing", "database_url": url, "ratelimit_enabled": False})
    with app.extensions["db"].read() as conn:
        total = conn.execute(text("SELECT count(*) FROM events")).scalar_one()
    results = []
    for name, ms, p95 in medians(app, token):
        results.append(
            {
                "name": f"analytics {name}, {total:,} events, {backend} (p95 {p95:.1f} ms)",
                "figure": round(ms, 1),
                "unit": f"ms (median of {REPEATS})",
                "baseline": "budget",
                "baseline_figure": budget_ms,
                "ratio": round(ms / budget_ms, 2),
                "budget": f"< {budget_ms} ms",
                "ok": ms < budget_ms,
            }
        )
    app.extensions["db"].dispose()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--events", default="1000000,10000000", help="comma-separated sizes, each a multiple of the first"
    )
    parser.add_argument("--backends", default="sqlite,postgresql", help="which of the two to measure")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sizes = [int(s) for s in args.events.split(",")]
    targets = []
    if "sqlite" in args.backends:
        targets.append(("SQLite", f"sqlite:///{Path(tempfile.mkdtemp(prefix='bench-analytics-')) / 'a.db'}"))
    if "postgresql" in args.backends and os.environ.get("WORKBENCH_BENCH_DATABASE_URL"):
        targets.append(("PostgreSQL", os.environ["WORKBENCH_BENCH_DATABASE_URL"]))
    for backend, url in targets:
        print(f"== populating {backend} with {sizes[0]:,} events", file=sys.stderr, flush=True)
        token = populate(url, sizes[0])
        tops = original(url)
        catch_up(url)
        copies = 0
        for size in sizes:
            if size // sizes[0] - 1 > copies:
                print(f"== {backend}: copying up to {size:,} events", file=sys.stderr, flush=True)
                scale(url, tops, copies + 1, size // sizes[0] - 1)
                copies = size // sizes[0] - 1
                catch_up(url)
            budget = BUDGETS_MS.get(size, BUDGETS_MS[10_000_000])
            for result in measure(url, backend, token, budget):
                emit(result, args.json)


if __name__ == "__main__":
    main()
