"""Credentials are judged before a body is read (issue 40): a caller without a valid key costs
the service no parsing, whatever it sends; and a body-less DELETE is not refused for the
Content-Type a client sets on every request."""

import pytest

from ..api.helpers import event

EVENTS = "/api/v1/events"
BAD_KEY = {"Authorization": "Bearer wb_unknown1_" + "x" * 40}


@pytest.mark.parametrize(
    "body",
    [b"{not json", b'{"tokens": ' + b"[" * 5000, b"x" * 3_000_000],
    ids=["malformed", "deeply nested", "over the size limit"],
)
def test_an_unknown_key_is_401_whatever_the_body_holds(client, body):
    answer = client.post(EVENTS, data=body, headers={**BAD_KEY, "Content-Type": "application/json"})
    assert answer.status_code == 401, answer.json
    assert answer.mimetype == "application/problem+json"
    assert "unknown or revoked" in answer.json["detail"]
    assert answer.headers["WWW-Authenticate"].startswith("Bearer")


def test_a_malformed_authorization_header_is_401_before_the_body(client):
    answer = client.post(EVENTS, data=b"{", headers={"Authorization": "Token abc", "Content-Type": "application/json"})
    assert answer.status_code == 401 and "Bearer" in answer.json["detail"]


def test_a_valid_key_still_gets_its_bodys_own_problem(client, make_key):
    answer = client.post(EVENTS, data=b"{not json", headers={**make_key("acme"), "Content-Type": "application/json"})
    assert answer.status_code == 400 and answer.mimetype == "application/problem+json"


def test_logging_out_with_a_json_content_type_and_no_body_is_a_logout(client):
    client.post("/api/v1/session")
    answer = client.delete("/api/v1/session", headers={"Content-Type": "application/json"})
    assert answer.status_code == 204
    assert client.get("/api/v1/session").status_code == 404  # logged out


def test_erasing_a_learner_with_a_json_content_type_and_no_body_erases_them(client, make_key):
    headers = make_key("acme")
    assert client.post(EVENTS, json=event(learner="ada"), headers=headers).status_code == 201
    answer = client.delete("/api/v1/learners/ada", headers={**headers, "Content-Type": "application/json"})
    assert answer.status_code == 200 and answer.json["learner"] == "ada"
    assert client.get("/api/v1/learners/ada/events", headers=headers).status_code == 404


def test_a_delete_that_does_send_a_body_still_has_it_read(client, make_key):
    answer = client.delete(
        "/api/v1/learners/ada", data=b"{not json", headers={**make_key("acme"), "Content-Type": "application/json"}
    )
    assert answer.status_code == 400  # a body that is sent is parsed, and this one is not JSON
