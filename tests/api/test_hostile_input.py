"""Crafted values never reach the database and never make a 500: signed, strictly parsed
cursors; no control characters in any path or query value; nesting checked before recursion."""

from __future__ import annotations

import base64
import datetime as dt
import uuid

import pytest

from .helpers import LESSON, event

pytestmark = pytest.mark.databases
X = {"X-Experience-API-Version": "1.0.3"}


def unsigned(position: str) -> str:
    """What a client could make by guessing the format of an unsigned cursor."""
    return base64.urlsafe_b64encode(position.encode()).decode().rstrip("=")


@pytest.fixture
def analyst(make_key):
    return make_key("acme", "events:write,progress:read,analytics:read")


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/learners/learner-1/events?cursor={}",
        "/api/v1/xapi/statements?cursor={}",
        "/api/v1/analytics/events/export?after={}",
        f"/api/v1/analytics/learners?lesson={LESSON}&cursor={{}}",
    ],
)
@pytest.mark.parametrize(
    "position",
    ["e99999999999999999999999", "99999999999999999999999", "e٣", "٣", "e5", "5", "2026-11-30T00:00:00+00:00|1"],
)
def test_a_cursor_the_service_did_not_sign_is_400(client, analyst, path, position):
    client.post("/api/v1/events", json=event(), headers=analyst)
    response = client.get(path.format(unsigned(position)), headers={**analyst, **X})
    assert response.status_code == 400, response.data[:200]
    assert response.content_type == "application/problem+json"


def test_a_signed_cursor_still_pages(client, analyst):
    for _ in range(3):
        client.post("/api/v1/events", json=event(), headers=analyst)
    first = client.get("/api/v1/learners/learner-1/events?limit=2", headers=analyst).json
    second = client.get(f"/api/v1/learners/learner-1/events?limit=2&cursor={first['next']}", headers=analyst).json
    assert len(first["events"]) == 2 and len(second["events"]) == 1
    tampered = first["next"][:-2] + ("AA" if not first["next"].endswith("AA") else "BB")
    assert client.get(f"/api/v1/learners/learner-1/events?cursor={tampered}", headers=analyst).status_code == 400


@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/learners/a%00b/events",
        "/api/v1/learners/a%00b/progress",
        "/api/v1/xapi/statements?verb=http://x%00",
        "/api/v1/xapi/statements?agent=%7B%22account%22%3A%7B%22homePage%22%3A%22h%22%2C%22name%22%3A%22a%00%22%7D%7D",
        "/api/v1/analytics/learners?lesson=multi%00",
    ],
)
def test_control_characters_in_a_url_are_400_before_any_database_call(client, analyst, url):
    response = client.get(url, headers={**analyst, **X})
    assert response.status_code == 400 and response.json["type"].endswith("/invalid-url")


def test_a_nul_in_a_learner_to_erase_is_400(client, analyst):
    assert client.delete("/api/v1/learners/a%00b", headers=analyst).status_code == 400


@pytest.mark.parametrize("depth", [7, 256, 5000])
def test_deeply_nested_data_is_422_not_a_recursion(client, analyst, depth):
    deep = '{"a":' * depth + "1" + "}" * depth
    body = (
        f'{{"id": "{uuid.uuid4()}", "learner": "l1", "lesson": "{LESSON}", "checkpoint": "experiment", '
        f'"event": "parameter-changed", "instance_id": "multi-head-workbench", "data": {deep}, '
        f'"occurred_at": "{dt.datetime.now(dt.UTC).isoformat()}"}}'
    )
    response = client.post("/api/v1/events", data=body, content_type="application/json", headers=analyst)
    assert response.status_code in (400, 422), response.data[:200]  # 5000 levels: beyond the JSON parser's 1024
    assert response.content_type == "application/problem+json"
