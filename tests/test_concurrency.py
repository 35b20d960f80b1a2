"""Against gunicorn with several workers: concurrent clients, replays, conflicts, a killed worker.

0 lost, 0 duplicated, and exactly as many 409s as conflicting duplicates were sent.
"""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import time

import pytest
import requests
from sqlalchemy import create_engine, text

from service.db import Database
from service.db.platforms import create_key

from .api.helpers import event
from .live import LiveServer

pytestmark = pytest.mark.databases

CLIENTS, PER_CLIENT = 16, 200


@pytest.fixture
def server(database_url):
    db = Database(database_url)
    with db.write() as session:
        key, _ = create_key(session, "load", frozenset({"events:write", "progress:read"}))
    db.dispose()
    live = LiveServer({"WORKBENCH_DATABASE_URL": database_url, "WORKBENCH_RATELIMIT_ENABLED": "0"}, workers=4).start()
    yield live, {"Authorization": f"Bearer {key.token}"}
    live.stop()


def post_until_answered(session: requests.Session, url: str, body: dict, headers: dict) -> int:
    """POST with retries on 503 and dropped connections (same id: retrying is safe)."""
    for attempt in range(60):
        try:
            response = session.post(url, json=body, headers=headers, timeout=10)
        except requests.RequestException:  # refused, reset, or cut mid-response by a killed worker
            time.sleep(0.05 * min(attempt + 1, 10))
            continue
        if response.status_code == 503:
            time.sleep(float(response.headers.get("Retry-After", "1")) / 10)
            continue
        return response.status_code
    raise AssertionError(f"no answer for {body['id']} after 60 attempts")


def stored(database_url: str) -> dict[str, dict]:
    engine = create_engine(database_url)
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT event_id, data FROM events")).all()
    engine.dispose()
    return {r[0]: (r[1] if isinstance(r[1], dict) else json.loads(r[1])) for r in rows}


def test_concurrent_clients_with_replays_and_conflicts(server, database_url):
    live, headers = server
    url = live.url + "/api/v1/events"
    results: list[tuple[str, str, int]] = []  # (kind, id, status)
    lock = threading.Lock()

    def client(n: int) -> None:
        rng = random.Random(n)
        session = requests.Session()
        mine = [event(f"learner-{n}", data={"n": n, "i": i}) for i in range(PER_CLIENT)]
        for body in mine:
            sends = [("new", body)]
            roll = rng.random()
            if roll < 0.10:
                sends.append(("replay", dict(body)))
            elif roll < 0.11:
                sends.append(("conflict", {**body, "data": {"tampered": True}}))
            for kind, payload in sends:
                status = post_until_answered(session, url, payload, headers)
                with lock:
                    results.append((kind, payload["id"], status))

    threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    by_kind = {k: [s for kind, _, s in results if kind == k] for k in ("new", "replay", "conflict")}
    assert set(by_kind["new"]) == {201}
    assert set(by_kind["replay"]) <= {200}
    assert by_kind["conflict"] and set(by_kind["conflict"]) == {409}
    rows = stored(database_url)
    assert len(rows) == CLIENTS * PER_CLIENT  # 0 lost, 0 duplicated (ids are unique per platform)
    assert not any(d.get("tampered") for d in rows.values())  # conflicts never overwrote


def test_a_worker_killed_mid_load_loses_no_acknowledged_event(server, database_url):
    live, headers = server
    url = live.url + "/api/v1/events"
    acknowledged: set[str] = set()
    lock = threading.Lock()
    stop_killing = threading.Event()

    def client(n: int) -> None:
        session = requests.Session()
        for i in range(120):
            body = event(f"crash-{n}", data={"i": i})
            if post_until_answered(session, url, body, headers) in (200, 201):
                with lock:
                    acknowledged.add(body["id"])

    def killer() -> None:
        time.sleep(0.5)
        while not stop_killing.is_set():
            pids = live.worker_pids()
            if pids:
                os.kill(random.choice(pids), signal.SIGKILL)
            stop_killing.wait(1.0)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(8)]
    murderer = threading.Thread(target=killer)
    murderer.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop_killing.set()
    murderer.join()
    rows = stored(database_url)
    assert acknowledged <= set(rows)  # every acknowledged event is stored
    assert len(acknowledged) == 8 * 120  # and with retries every event was acknowledged once
