"""A flood of maximum-size compute requests does not push event ingestion p99 above 2x idle.

Large traces run in a low-priority process per worker, one at a time, and their JSON leaves
by sendfile; more are shed with 503 + Retry-After. The flooding clients run niced too: they
stand for other machines, not for this one's CPU.
"""

from __future__ import annotations

import multiprocessing
import os
import statistics
import time

import numpy as np
import pytest
import requests

from service.db.migrate import upgrade

from ..api.helpers import event
from ..live import LiveServer
from .test_faults import make_key


def _flood(url: str, seconds: float) -> int:
    os.nice(19)
    n = 724  # heads * n * n = 524,176: just under max_score_cells (524,288)
    body = {"tokens": np.random.default_rng(os.getpid()).normal(size=(n, 8)).round(3).tolist(), "heads": 1}
    session, done, deadline = requests.Session(), 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        with session.post(url, json=body, stream=True, timeout=120) as response:
            for _ in response.iter_content(1 << 20):
                pass
            done += response.status_code == 200
    return done


def _latencies(url: str, token: str, count: int) -> list[float]:
    session = requests.Session()
    headers = {"Authorization": f"Bearer {token}"}
    session.post(url, json=event("warm"), headers=headers)
    times = []
    for i in range(count):
        start = time.perf_counter()
        response = session.post(url, json=event(f"ingest-{i % 20}"), headers=headers, timeout=30)
        times.append(time.perf_counter() - start)
        assert response.status_code == 201, response.text
    return times


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[-1]


@pytest.mark.skipif(
    not os.environ.get("WORKBENCH_TEST_FLOOD"),
    reason="timing-sensitive (p99, shared 2-core VM): set WORKBENCH_TEST_FLOOD=1 on a quiet machine",
)
def test_a_compute_flood_keeps_ingestion_p99_within_twice_idle(tmp_path):
    # SQLite only: on PostgreSQL each event's durable commit (an fsync here) dominates both
    # measurements and its jitter alone moves p99 by 2x (measured 12.8 ms idle, 27.1 ms loaded).
    url = f"sqlite:///{tmp_path / 'flood.db'}"
    upgrade(url)
    token = make_key(url)
    server = LiveServer(
        {"WORKBENCH_DATABASE_URL": url, "WORKBENCH_RATELIMIT_ENABLED": "0"}, workers=2, threads=4
    ).start()
    try:
        time.sleep(3)  # the workers' compute processes finish starting
        events_url = server.url + "/api/v1/events"
        idle = _latencies(events_url, token, 300)
        with multiprocessing.get_context("spawn").Pool(3) as pool:
            flood = pool.starmap_async(_flood, [(server.url + "/api/v1/attention", 25.0)] * 3)
            time.sleep(4)  # the flood is under way
            loaded = _latencies(events_url, token, 300)
            computed = sum(flood.get(timeout=200))
    finally:
        server.stop()
    assert computed > 0  # the flood really ran (some of it was shed with 503)
    assert p99(loaded) <= 2 * p99(idle), f"idle p99 {p99(idle) * 1000:.1f} ms, under flood {p99(loaded) * 1000:.1f} ms"
