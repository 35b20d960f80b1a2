"""Rate limits per key and per browser learner; 429 problem+json with Retry-After."""

import os

import pytest

from service.app import create_app

from ..api.helpers import event

REDIS = os.environ.get("WORKBENCH_TEST_REDIS_URL", "")


def limited_app(app_config, **extra):
    return create_app(
        {**app_config, "ratelimit_enabled": True, "ratelimit_key": "3/minute", "ratelimit_learner": "2/minute", **extra}
    )


def key_for(app, platform="acme"):
    from service.db.platforms import create_key

    with app.extensions["db"].write() as s:
        key, _ = create_key(s, platform, frozenset({"events:write", "progress:read"}))
    return {"Authorization": f"Bearer {key.token}"}


def test_a_key_over_its_limit_gets_429_with_retry_after(app_config):
    app = limited_app(app_config)
    client = app.test_client()
    headers = key_for(app)
    statuses = [client.post("/api/v1/events", json=event(), headers=headers).status_code for _ in range(4)]
    assert statuses == [201, 201, 201, 429]
    response = client.post("/api/v1/events", json=event(), headers=headers)
    assert response.status_code == 429 and response.mimetype == "application/problem+json"
    assert int(response.headers["Retry-After"]) > 0


def test_limits_are_per_key(app_config):
    app = limited_app(app_config)
    client = app.test_client()
    first, second = key_for(app, "acme"), key_for(app, "globex")
    for _ in range(3):
        client.post("/api/v1/events", json=event(), headers=first)
    assert client.post("/api/v1/events", json=event(), headers=first).status_code == 429
    assert client.post("/api/v1/events", json=event(), headers=second).status_code == 201


def test_limits_are_per_browser_learner(app_config):
    app = limited_app(app_config)
    alice, bob = app.test_client(), app.test_client()
    for client in (alice, bob):
        client.post("/api/v1/session")  # before the cookie exists: counted against the address
    assert [alice.get("/api/v1/session").status_code for _ in range(3)] == [200, 200, 429]
    assert bob.get("/api/v1/session").status_code == 200


def test_health_probes_are_never_limited(app_config):
    client = limited_app(app_config).test_client()
    assert all(client.get("/healthz").status_code == 200 for _ in range(10))


@pytest.mark.skipif(not REDIS, reason="shared limits need WORKBENCH_TEST_REDIS_URL (set by .ci/run)")
def test_limits_are_shared_across_workers_through_redis(app_config):
    # Two apps stand for two gunicorn workers; each new key has fresh counters in Redis.
    first = limited_app(app_config, ratelimit_storage_uri=REDIS)
    second = create_app(
        {**app_config, "ratelimit_enabled": True, "ratelimit_key": "3/minute", "ratelimit_storage_uri": REDIS}
    )
    headers = key_for(first)
    a, b = first.test_client(), second.test_client()
    statuses = [client.post("/api/v1/events", json=event(), headers=headers).status_code for client in (a, b, a, b)]
    assert statuses == [201, 201, 201, 429]


def test_knowing_a_keys_prefix_does_not_spend_its_budget(app_config):
    app = limited_app(app_config)
    client = app.test_client()
    headers = key_for(app)
    prefix = headers["Authorization"].split("_")[1]
    forged = {"Authorization": f"Bearer wb_{prefix}_{'x' * 43}"}
    assert [client.post("/api/v1/events", json=event(), headers=forged).status_code for _ in range(3)] == [
        401,
        401,
        429,
    ]
    statuses = [client.post("/api/v1/events", json=event(), headers=headers).status_code for _ in range(3)]
    assert statuses == [201, 201, 201]  # the platform's own budget is untouched


def test_made_up_keys_are_limited_by_their_senders_address(app_config):
    import secrets

    client = limited_app(app_config).test_client()
    statuses = []
    for _ in range(3):
        fake = {"Authorization": f"Bearer wb_{secrets.token_hex(4)}_{secrets.token_urlsafe(32)}"}
        statuses.append(client.post("/api/v1/events", json=event(), headers=fake).status_code)
    assert statuses == [401, 401, 429]


def test_an_unreachable_rate_limit_store_degrades_readiness_but_serves(app_config):
    from service.observability import RATELIMIT_STORAGE_TROUBLE

    before = RATELIMIT_STORAGE_TROUBLE._value.get()
    app = limited_app(app_config, ratelimit_storage_uri="redis://127.0.0.1:9/0")  # nothing listens on port 9
    client = app.test_client()
    headers = key_for(app)
    assert [client.post("/api/v1/events", json=event(), headers=headers).status_code for _ in range(2)] == [201, 201]
    assert client.get("/api/v1/lessons").status_code == 200
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json["status"] == "degraded"
    assert RATELIMIT_STORAGE_TROUBLE._value.get() > before
