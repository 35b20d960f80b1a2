"""Progress, paginated events, erasure and the replay policy for erased ids."""

import pytest

from .helpers import completed, event, experiment

pytestmark = pytest.mark.databases


def test_progress_lists_every_checkpoint_in_lesson_order(client, acme):
    client.post("/api/v1/events", json=completed("explain"), headers=acme)
    body = client.get("/api/v1/learners/learner-1/progress", headers=acme).json
    lesson = body["lessons"][0]
    assert [c["id"] for c in lesson["checkpoints"]] == ["predict", "experiment", "implement", "explain"]
    assert [c["completed"] for c in lesson["checkpoints"]] == [False, False, False, True]
    assert (lesson["completed"], lesson["total"]) == (1, 4)


def test_progress_of_an_unknown_lesson_is_404(client, acme):
    client.post("/api/v1/events", json=event(), headers=acme)
    assert client.get("/api/v1/learners/learner-1/progress?lesson=nope", headers=acme).status_code == 404


def test_unknown_learner_is_404(client, acme):
    assert client.get("/api/v1/learners/ghost/progress", headers=acme).status_code == 404
    assert client.get("/api/v1/learners/ghost/events", headers=acme).status_code == 404
    assert client.delete("/api/v1/learners/ghost", headers=acme).status_code == 404


def test_events_are_paginated_with_a_cursor_and_none_is_lost(client, acme):
    sent = [event() for _ in range(7)]
    client.post("/api/v1/events", json={"events": sent}, headers=acme)
    seen, cursor = [], None
    while True:
        query = "?limit=3" + (f"&cursor={cursor}" if cursor else "")
        page = client.get(f"/api/v1/learners/learner-1/events{query}", headers=acme).json
        seen += [e["id"] for e in page["events"]]
        cursor = page["next"]
        if cursor is None:
            break
    assert sorted(seen) == sorted(e["id"] for e in sent) and len(seen) == 7


@pytest.mark.parametrize("query", ["?cursor=%%%", "?cursor=ZXZpbA", "?limit=0", "?limit=5000", "?limit=abc"])
def test_bad_page_arguments_are_4xx(client, acme, query):
    client.post("/api/v1/events", json=event(), headers=acme)
    response = client.get(f"/api/v1/learners/learner-1/events{query}", headers=acme)
    assert response.status_code in (400, 422) and response.mimetype == "application/problem+json"


def test_erasure_removes_events_progress_and_checks_and_replays_are_not_stored(client, acme):
    sent = [completed("predict"), *experiment()]
    client.post("/api/v1/events", json={"events": sent}, headers=acme)
    response = client.delete("/api/v1/learners/learner-1", headers=acme)
    assert response.status_code == 200
    assert response.json["erased"] == {"events": 5, "checkpoints": 2, "exercise_checks": 0}
    assert client.get("/api/v1/learners/learner-1/progress", headers=acme).status_code == 404
    replay = client.post("/api/v1/events", json={"events": sent}, headers=acme)
    assert replay.status_code == 200
    assert {e["status"] for e in replay.json["events"]} == {"erased"}
    assert client.get("/api/v1/learners/learner-1/events", headers=acme).status_code == 404
    fresh = client.post("/api/v1/events", json=event(), headers=acme)  # a new id starts a new record
    assert fresh.status_code == 201
