"""Two instances of the service (two gunicorn masters, as two machines would run) on one
PostgreSQL and one Redis: limits shared, sessions portable, an event sent to both at once
stored once, a key revoked through one refused by the other within the stated bound."""

from __future__ import annotations

import os
import threading
import time

import pytest
import requests

from service.db import Database
from service.db.platforms import create_key, revoke_key

from ..api.helpers import event
from ..conftest import PG_URL
from ..live import LiveServer

REDIS = os.environ.get("WORKBENCH_TEST_REDIS_URL", "")
SECRET = "two-instances-share-this-secret-" + "x" * 16
CACHE_SECONDS = 1.0


@pytest.fixture
def instances(postgres_url):
    if not REDIS:
        pytest.skip("two instances share limits through Redis: set WORKBENCH_TEST_REDIS_URL (.ci/run does)")
    env = {
        "WORKBENCH_DATABASE_URL": postgres_url,
        "WORKBENCH_RATELIMIT_STORAGE_URI": REDIS,
        "WORKBENCH_RATELIMIT_KEY": "6/minute",
        "WORKBENCH_SECRET_KEY": SECRET,
        "WORKBENCH_AUTH_CACHE_SECONDS": str(CACHE_SECONDS),
    }
    first, second = LiveServer(env, workers=1).start(), LiveServer(env, workers=1).start()
    yield first, second
    first.stop()
    second.stop()


def new_key() -> tuple[str, str]:
    db = Database(PG_URL)
    with db.write() as session:
        key, _ = create_key(session, f"two-{time.monotonic_ns()}", frozenset({"events:write", "progress:read"}))
    db.dispose()
    return key.token, key.prefix


def test_limits_are_shared(instances):
    first, second = instances
    token, _ = new_key()
    headers = {"Authorization": f"Bearer {token}"}
    statuses = [
        requests.post(server.url + "/api/v1/events", json=event(), headers=headers, timeout=10).status_code
        for server in (first, second) * 4
    ]
    assert statuses == [201] * 6 + [429, 429]


def test_a_session_made_on_one_works_on_the_other(instances):
    first, second = instances
    browser = requests.Session()
    learner = browser.post(first.url + "/api/v1/session", timeout=10).json()["learner"]
    assert browser.get(second.url + "/api/v1/session", timeout=10).json()["learner"] == learner
    assert browser.post(second.url + "/api/v1/events", json=event(learner), timeout=10).status_code == 201
    assert browser.delete(first.url + "/api/v1/session", timeout=10).status_code == 204


def test_the_same_event_sent_to_both_at_once_is_stored_once(instances):
    first, second = instances
    results: list[int] = []
    for _ in range(10):
        token, _ = new_key()  # a key per pair: the 6-a-minute limit is not what this test is about
        headers = {"Authorization": f"Bearer {token}"}
        body = event("racer")
        barrier = threading.Barrier(2)

        def send(server, body=body, barrier=barrier, headers=headers):
            barrier.wait()
            results.append(
                requests.post(server.url + "/api/v1/events", json=body, headers=headers, timeout=10).status_code
            )

        threads = [threading.Thread(target=send, args=(server,)) for server in (first, second)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        page = requests.get(first.url + "/api/v1/learners/racer/events", headers=headers, timeout=10).json()
        assert [e["id"] for e in page["events"]] == [body["id"]]  # stored once
    assert sorted(results) == [200] * 10 + [201] * 10  # each pair: one stored, one identical replay


def test_a_key_revoked_through_one_is_refused_by_the_other_within_the_bound(instances):
    first, second = instances
    token, prefix = new_key()
    headers = {"Authorization": f"Bearer {token}"}
    assert requests.post(second.url + "/api/v1/events", json=event(), headers=headers, timeout=10).status_code == 201
    db = Database(PG_URL)
    with db.write() as session:
        revoke_key(session, prefix)
    db.dispose()
    revoked_at = time.monotonic()
    while requests.post(second.url + "/api/v1/events", json=event(), headers=headers, timeout=10).status_code != 401:
        assert time.monotonic() - revoked_at < CACHE_SECONDS + 1.0, "the other instance kept accepting a revoked key"
        time.sleep(0.1)
