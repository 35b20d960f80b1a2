"""A database that does not answer gives 503 with Retry-After, never 500; nothing half-written."""

import sqlite3

import pytest

from service.app import create_app

from ..api.helpers import event


@pytest.fixture
def locked_sqlite(app_config):
    """An app with a short busy timeout, and a second connection holding the write lock."""
    app = create_app({**app_config, "sqlite_busy_timeout_ms": 200})
    path = app_config["database_url"].split("///", 1)[1]
    from service.db.platforms import create_key

    with app.extensions["db"].write() as s:
        key, _ = create_key(s, "acme", frozenset({"events:write", "progress:read"}))
    holder = sqlite3.connect(path, isolation_level=None, timeout=0)
    yield app, {"Authorization": f"Bearer {key.token}"}, holder
    holder.close()


def test_a_lock_held_past_the_busy_timeout_is_503_then_everything_is_stored_once(locked_sqlite):
    app, headers, holder = locked_sqlite
    client = app.test_client()
    batch = [event() for _ in range(5)]
    holder.execute("BEGIN IMMEDIATE")
    response = client.post("/api/v1/events", json={"events": batch}, headers=headers)
    assert response.status_code == 503
    assert response.mimetype == "application/problem+json"
    assert int(response.headers["Retry-After"]) > 0
    ready = client.get("/readyz")
    assert ready.status_code == 503 and ready.headers["Retry-After"]
    holder.execute("ROLLBACK")
    assert client.get("/readyz").status_code == 200
    retry = client.post("/api/v1/events", json={"events": batch}, headers=headers)
    assert retry.status_code == 201 and retry.json["created"] == 5
    again = client.post("/api/v1/events", json={"events": batch}, headers=headers)
    assert again.status_code == 200 and again.json["duplicates"] == 5


def test_postgresql_unreachable_is_503_everywhere_it_is_needed(tmp_path):
    app = create_app(
        {"env": "testing", "ratelimit_enabled": False, "database_url": "postgresql+psycopg://postgres@127.0.0.1:1/none"}
    )
    client = app.test_client()
    headers = {"Authorization": "Bearer wb_abcdef12_" + "x" * 43}
    for response in (
        client.post("/api/v1/events", json=event(), headers=headers),
        client.get("/api/v1/learners/x/progress", headers=headers),
        client.post("/api/v1/session"),
        client.get("/readyz"),
    ):
        assert response.status_code == 503, response.data
        assert response.headers["Retry-After"]
        assert response.mimetype == "application/problem+json"
    assert client.post("/api/v1/attention", json={"tokens": [[1, 2]], "heads": 1}).status_code == 200
