"""Faults under load: killed workers, a SQLite lock past the busy timeout, PostgreSQL gone.

0 lost, 0 duplicated; only 503s with Retry-After while the database is away; recovery
without a restart.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import sqlite3
import threading
import time
from urllib.parse import urlsplit

import pytest
import requests
from sqlalchemy import create_engine, text

from service.db import Database
from service.db.migrate import upgrade
from service.db.platforms import create_key

from ..api.helpers import event
from ..conftest import PG_URL
from ..live import LiveServer
from .tcp_proxy import TcpProxy


def make_key(url: str) -> str:
    db = Database(url)
    with db.write() as session:
        key, _ = create_key(session, f"faults-{random.randrange(10**6)}", frozenset({"events:write"}))
    db.dispose()
    return key.token


def stored(url: str, column: str) -> list[str]:
    engine = create_engine(url)
    with engine.connect() as conn:
        values = [r[0] for r in conn.execute(text(f"SELECT {column} FROM events"))]
    engine.dispose()
    return values


def stored_ids(url: str) -> list[str]:
    return stored(url, "event_id")


def post_until_acknowledged(url: str, token: str, body: dict, statuses: list | None = None) -> int:
    session = requests.Session()
    for _ in range(400):
        try:
            response = session.post(url, json=body, headers={"Authorization": f"Bearer {token}"}, timeout=10)
        except requests.RequestException:
            time.sleep(0.05)
            continue
        if statuses is not None:
            statuses.append((response.status_code, response.headers.get("Retry-After")))
        if response.status_code in (503, 429):
            time.sleep(0.1)
            continue
        return response.status_code
    raise AssertionError("never acknowledged")


def _client(args):
    url, token, n, count = args
    acknowledged = []
    for i in range(count):
        body = event(f"proc-{n}", data={"i": i})
        if post_until_acknowledged(url, token, body) in (200, 201):
            acknowledged.append(body["id"])
    return acknowledged


@pytest.mark.databases
def test_processes_with_retries_while_workers_are_killed(database_url):
    token = make_key(database_url)
    server = LiveServer({"WORKBENCH_DATABASE_URL": database_url, "WORKBENCH_RATELIMIT_ENABLED": "0"}, workers=3).start()
    stop = threading.Event()

    def killer():
        while not stop.wait(0.7):
            pids = server.worker_pids()
            if pids:
                os.kill(random.choice(pids), signal.SIGKILL)

    thread = threading.Thread(target=killer)
    thread.start()
    try:
        with multiprocessing.get_context("spawn").Pool(4) as pool:
            results = pool.map(_client, [(server.url + "/api/v1/events", token, n, 150) for n in range(4)])
    finally:
        stop.set()
        thread.join()
        server.stop()
    acknowledged = [i for part in results for i in part]
    ids = stored_ids(database_url)
    assert len(acknowledged) == 600 and set(acknowledged) <= set(ids)  # 0 lost
    assert len(ids) == len(set(ids))  # 0 duplicated


def test_a_sqlite_lock_past_the_busy_timeout_gives_only_503s_then_everything_once(tmp_path):
    path = tmp_path / "locked.db"
    url = f"sqlite:///{path}"
    upgrade(url)
    token = make_key(url)
    server = LiveServer(
        {"WORKBENCH_DATABASE_URL": url, "WORKBENCH_RATELIMIT_ENABLED": "0", "WORKBENCH_SQLITE_BUSY_TIMEOUT_MS": "200"},
        workers=2,
    ).start()
    holder = sqlite3.connect(path, isolation_level=None)
    statuses: list = []
    try:
        holder.execute("BEGIN IMMEDIATE")
        bodies = [event(f"locked-{i}") for i in range(20)]
        results: list[int] = []
        threads = [
            threading.Thread(
                target=lambda b=b: results.append(
                    post_until_acknowledged(server.url + "/api/v1/events", token, b, statuses)
                )
            )
            for b in bodies
        ]
        for t in threads:
            t.start()
        time.sleep(2.0)
        # Sync workers: /readyz queues behind the 20 clients' retries, each holding a worker for
        # the 200 ms busy timeout, so its answer can take seconds; what it answers is the point.
        ready = requests.get(server.url + "/readyz", timeout=30)
        assert ready.status_code == 503 and ready.headers["Retry-After"]
        holder.execute("ROLLBACK")
        for t in threads:
            t.join()
    finally:
        holder.close()
        server.stop()
    during = [s for s in statuses if s[0] != 201]
    assert during and all(code == 503 and retry for code, retry in during)  # only 503 + Retry-After
    assert set(results) == {201}
    ids = stored_ids(url)
    assert sorted(ids) == sorted(b["id"] for b in bodies)


def test_postgresql_going_away_gives_503s_and_a_failing_readyz_then_recovers_without_restart():
    if not PG_URL:
        pytest.skip("needs WORKBENCH_TEST_DATABASE_URL (set by .ci/run)")
    from ..conftest import _reset_postgres

    _reset_postgres(PG_URL)
    upgrade(PG_URL)
    token = make_key(PG_URL)
    proxy = TcpProxy("127.0.0.1", 5432)
    proxy.open()
    proxied = PG_URL.replace("127.0.0.1:5432", f"127.0.0.1:{proxy.port}")
    server = LiveServer({"WORKBENCH_DATABASE_URL": proxied, "WORKBENCH_RATELIMIT_ENABLED": "0"}, workers=2).start()
    headers = {"Authorization": f"Bearer {token}"}
    url = server.url + "/api/v1/events"
    try:
        assert requests.post(url, json=event("before"), headers=headers, timeout=10).status_code == 201
        proxy.close()
        down = [requests.post(url, json=event("during"), headers=headers, timeout=20) for _ in range(4)]
        assert down and all(r.status_code == 503 and r.headers["Retry-After"] for r in down), [
            r.status_code for r in down
        ]
        assert requests.get(server.url + "/readyz", timeout=20).status_code == 503
        proxy.open()
        deadline = time.monotonic() + 30
        while requests.get(server.url + "/readyz", timeout=20).status_code != 200:
            assert time.monotonic() < deadline, "never recovered"
            time.sleep(0.5)
        assert requests.post(url, json=event("after"), headers=headers, timeout=10).status_code == 201
    finally:
        server.stop()
        proxy.close()
    assert set(stored(PG_URL, "learner")) == {"before", "after"}  # the refused events were not half-written


@pytest.mark.databases
def test_redis_going_away_degrades_readiness_and_the_api_keeps_serving(database_url):
    redis_url = os.environ.get("WORKBENCH_TEST_REDIS_URL", "")
    if not redis_url:
        pytest.skip("needs WORKBENCH_TEST_REDIS_URL (set by .ci/run)")
    address = urlsplit(redis_url)
    proxy = TcpProxy(address.hostname, address.port or 6379)
    proxy.open()
    token = make_key(database_url)
    server = LiveServer(
        {
            "WORKBENCH_DATABASE_URL": database_url,
            "WORKBENCH_RATELIMIT_STORAGE_URI": redis_url.replace(address.netloc, f"127.0.0.1:{proxy.port}"),
        },
        workers=2,
    ).start()
    headers = {"Authorization": f"Bearer {token}"}
    acknowledged = []

    def post(phase: str, count: int) -> list[int]:
        statuses = []
        for _ in range(count):
            body = event(f"redis-{phase}")
            response = requests.post(server.url + "/api/v1/events", json=body, headers=headers, timeout=20)
            statuses.append(response.status_code)
            if response.status_code == 201:
                acknowledged.append(body["id"])
        return statuses

    def readiness() -> str:
        return requests.get(server.url + "/readyz", timeout=20).json()["status"]

    workbench = {"tokens": [[1, 0, 0, 0], [0, 1, 0, 0], [1, 1, 0, 0]], "heads": 2}
    try:
        assert post("before", 3) == [201] * 3 and readiness() == "ready"
        proxy.close()
        assert post("during", 10) == [201] * 10
        assert requests.post(server.url + "/api/v1/attention", json=workbench, timeout=20).status_code == 200
        assert readiness() == "degraded"
        proxy.open()
        deadline = time.monotonic() + 30
        while readiness() != "ready":
            assert time.monotonic() < deadline, "readiness never came back"
            time.sleep(0.5)
        assert post("after", 3) == [201] * 3
    finally:
        server.stop()
        proxy.close()
    assert sorted(i for i in stored_ids(database_url) if i in set(acknowledged)) == sorted(acknowledged)
