"""A platform's engineer reads the error and knows what to change: the field as they sent it,
where it was (a query parameter is not a JSON field), the format a date needs with an example,
the value they sent rather than its type, and a bad key before anything about the body."""

from __future__ import annotations

import pytest

from tests.api.helpers import event

EXPORT = "/api/v1/analytics/events/export"


def test_a_single_event_without_an_id_names_id_not_a_batch_position(client, acme):
    body = event()
    del body["id"]
    answer = client.post("/api/v1/events", json=body, headers=acme)
    assert answer.status_code == 422
    assert set(answer.json["errors"]) == {"id"}
    assert "events.0" not in answer.json["detail"]


def test_the_same_event_in_a_batch_is_named_by_its_position(client, acme):
    body = event()
    del body["id"]
    answer = client.post("/api/v1/events", json={"events": [body]}, headers=acme)
    assert answer.status_code == 422
    assert set(answer.json["errors"]) == {"events.0.id"}


def test_a_bad_query_parameter_is_called_a_query_parameter(client, acme):
    answer = client.get(EXPORT + "?format=xml", headers=acme)
    assert answer.status_code == 422
    detail = answer.json["detail"]
    assert detail.startswith("query parameter 'format' is invalid")
    assert "ndjson" in detail and "csv" in detail  # what it may be
    assert "JSON" not in detail  # nothing was sent as JSON


@pytest.mark.parametrize(
    ("sent", "said"),
    [
        ("yesterday", 'got the string "yesterday"'),
        ("2026-11-29T10:00:00", "must name its time zone"),
        ("2026-13-01T00:00:00Z", 'got the string "2026-13-01T00:00:00Z"'),
    ],
)
def test_a_bad_date_names_iso_8601_with_a_zone_and_an_example(client, acme, sent, said):
    answer = client.post("/api/v1/events", json=event(occurred_at=sent), headers=acme)
    assert answer.status_code == 422
    (message,) = answer.json["errors"]["occurred_at"]
    assert said in message
    assert "2026-12-01T09:30:00Z" in message  # an example that would be accepted
    assert (
        client.post("/api/v1/events", json=event(occurred_at="2026-12-01T09:30:00Z"), headers=acme).status_code == 201
    )


def test_a_bad_date_in_the_query_string_says_the_same(client, acme):
    answer = client.get("/api/v1/analytics/lessons/multi-head-attention/funnel?from=last-week", headers=acme)
    assert answer.status_code == 422
    assert "query parameter 'from' is invalid: must be an ISO 8601 date-time" in answer.json["detail"]


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/v1/events", {"events": "not a list"}),
        ("/api/v1/exercises/multi-head-attention/challenges", {"learner": 12}),
        ("/api/v1/exercises/multi-head-attention/check", {"case": None}),
    ],
)
def test_an_unknown_key_is_401_before_the_body_is_judged(client, path, body):
    answer = client.post(path, json=body, headers={"Authorization": "Bearer wb_unknown_key_0000000000000000"})
    assert answer.status_code == 401
    assert answer.json["detail"] == "the API key is unknown or revoked"
    assert "errors" not in answer.json


def test_an_unknown_key_on_a_query_is_401_before_the_query_is_judged(client):
    answer = client.get(EXPORT + "?format=xml", headers={"Authorization": "Bearer wb_unknown_key_0000000000000000"})
    assert answer.status_code == 401


def test_xapi_offers_basic_as_well_as_bearer(client):
    answer = client.get("/api/v1/xapi/statements", headers={"X-Experience-API-Version": "1.0.3"})
    assert answer.status_code == 401
    offered = answer.headers["WWW-Authenticate"]
    assert offered.startswith("Bearer ") and "Basic " in offered
    assert "Basic" not in client.get(EXPORT).headers["WWW-Authenticate"]  # the export takes Bearer only


@pytest.mark.parametrize(
    ("tokens", "said"),
    [
        ([], "got an empty list"),
        ({"row": [1, 2]}, "got an object with 1 key"),
        ("1, 2, 3, 4", 'got the string "1, 2, 3, 4"'),
        ([[1, 2, 3, 4], []], "row 2 (counting from 1) must be a non-empty list of numbers, got an empty list"),
        ([[1, 2, 3, True]], "row 1, column 4 (counting from 1) must be a number, got true"),
    ],
)
def test_messages_describe_the_value_sent_not_its_type(client, tokens, said):
    answer = client.post("/api/v1/attention", json={"tokens": tokens, "heads": 2})
    assert answer.status_code == 422
    assert said in answer.json["errors"]["tokens"][0]
