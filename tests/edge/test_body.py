"""Every malformed, oversized or hostile compute request is a 4xx problem+json naming the fault."""

import math
import tracemalloc

import pytest

pytestmark = pytest.mark.usefixtures("app")

GOOD = {"tokens": [[1.0, 0.5, -0.5, 1.0], [0.2, 1.0, 1.5, -0.3]], "heads": 2}


def with_(**changes):
    body = dict(GOOD)
    for key, value in changes.items():
        if value is ...:
            body.pop(key)
        else:
            body[key] = value
    return body


def assert_problem(response, status, field=None, text=None):
    assert response.status_code == status, response.data
    assert response.mimetype == "application/problem+json"
    body = response.json
    assert body["status"] == status and body["title"] and body["type"].startswith("https://")
    assert body["detail"]
    if field is not None:
        assert field in body["errors"], body
    if text is not None:
        assert text in (body["detail"] + " " + str(body.get("errors"))), body


@pytest.mark.parametrize(
    "body, field, text",
    [
        (with_(tokens=...), "tokens", "Missing"),
        (with_(heads=...), "heads", "Missing"),
        (with_(heads=1.5), "heads", "integer"),
        (with_(heads="2"), "heads", "integer"),
        (with_(heads=True), "heads", "must be an integer, got true"),
        (with_(heads=0), "heads", None),
        (with_(heads=3), "heads", "d_model 4 is not divisible by heads 3"),
        (
            with_(tokens=[[1, True, 2, 3]]),
            "tokens",
            "row 1, column 2 (counting from 1) must be a number, got true",
        ),
        (
            with_(tokens=[[1, "2", 2, 3]]),
            "tokens",
            'row 1, column 2 (counting from 1) must be a number, got the string "2"',
        ),
        (with_(tokens=[[1, None, 2, 3]]), "tokens", "row 1, column 2 (counting from 1) must be a number, got null"),
        (with_(tokens=[[1, 2, 3, 4], [1, 2]]), "tokens", "row 2 (counting from 1) has 2 numbers"),
        (with_(tokens=[]), "tokens", "non-empty"),
        (with_(tokens=[[]]), "tokens", "non-empty"),
        (with_(tokens=[1, 2, 3, 4]), "tokens", "row 1 (counting from 1) must be a non-empty list"),
        (with_(tokens="abc"), "tokens", "list of rows"),
        (with_(causal="yes"), "causal", "true or false"),
        (with_(causal=1), "causal", "true or false"),
        (with_(surprise=1), "surprise", "Unknown field"),
        (with_(failure_mode="oops"), "failure_mode", "Must be one of"),
        (with_(failure_mode="no_scaling\u0000"), "failure_mode", "NUL"),
        (with_(rope={"style": "spiral"}), "rope.style", "Must be one of"),
        (with_(rope={"style": "half", "base": 0.5}), "rope.base", None),
        (with_(rope={"style": "half", "extra": 1}), "rope.extra", "Unknown field"),
        (with_(tokens=[[1, 2, 3, 4, 5, 6]], heads=2, rope={"style": "half"}), "rope", "even d_head"),
        (with_(projections={"query": [[1, 0], [0, 1]]}), "projections.query", "must have shape [4][4]"),
        (with_(projections={"key": [[1, 0, 0, 0]] * 4}, kv_heads=1), "projections.key", "must have shape [4][2]"),
        (with_(projections={"output": [[1, 0, 0, "x"]] * 4}), "projections.output", "must be a number"),
        (with_(projections={"mixer": [[1]]}), "projections.mixer", "Unknown field"),
        (with_(kv_heads=3), "kv_heads", "heads 2 is not divisible by kv_heads 3"),
        (with_(include=["everything"]), "include.0", "Must be one of"),
        (with_(precision=-1), "precision", None),
        (with_(precision=2.5), "precision", "integer"),
    ],
)
def test_invalid_fields_are_422_naming_the_field(client, body, field, text):
    assert_problem(client.post("/api/v1/attention", json=body), 422, field, text)


@pytest.mark.parametrize(
    "raw, text",
    [
        (b'{"tokens": [[NaN, 1]], "heads": 1}', "not valid JSON"),
        (b'{"tokens": [[Infinity, 1]], "heads": 1}', "not valid JSON"),
        (b'{"tokens": [[-Infinity, 1]], "heads": 1}', "not valid JSON"),
        (b'{"tokens": [[1e400, 1]], "heads": 1}', "not valid JSON"),
        (b'{"tokens": [[1, 2]], "heads": 1', "not valid JSON"),
        (b"", "empty"),
        (b'{"tokens": [[1, 2]],\x00 "heads": 1}', "not valid JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "not valid JSON"),
        (b"\xff\xfe", "not valid JSON"),
    ],
)
def test_malformed_json_is_400(client, raw, text):
    assert_problem(client.post("/api/v1/attention", data=raw, content_type="application/json"), 400, text=text)


def test_a_json_array_body_is_422_not_500(client):
    assert_problem(client.post("/api/v1/attention", json=[1, 2, 3]), 422)


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
def test_wrong_content_type_is_415(client, content_type):
    kwargs = {"data": '{"tokens": [[1]], "heads": 1}'}
    if content_type:
        kwargs["content_type"] = content_type
    assert_problem(client.post("/api/v1/attention", **kwargs), 415, text="application/json")


def test_wrong_method_is_405_problem_with_allow(client):
    response = client.get("/api/v1/attention")
    assert_problem(response, 405)
    assert "POST" in response.headers["Allow"]


@pytest.mark.parametrize(
    "body, cap",
    [
        ({"tokens": [[0.0] * 4] * 4096, "heads": 32}, "max_tokens"),
        ({"tokens": [[0.0] * 2048], "heads": 1}, "max_d_model"),
        ({"tokens": [[0.0] * 128], "heads": 128}, "max_heads"),
        ({"tokens": [[0.0] * 64] * 1000, "heads": 16}, "max_score_cells"),
    ],
)
def test_over_a_cap_is_413_naming_the_cap_before_allocating(client, body, cap):
    tracemalloc.start()  # numpy reports its arrays' memory to tracemalloc too
    try:
        response = client.post("/api/v1/attention", json=body)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert_problem(response, 413, text=cap)
    assert cap in response.json["limits"]
    # The score tensors would be 4 GiB (the first case) and 128 MB (the last): answering must
    # allocate neither (the request body and its parse take a few MB).
    assert peak < 32 * 2**20, f"{peak / 2**20:.1f} MiB"


def test_caps_are_configurable(app_config):
    from service.app import create_app

    small = create_app({**app_config, "max_tokens": 2}).test_client()
    assert_problem(
        small.post("/api/v1/attention", json={"tokens": [[1.0]] * 3, "heads": 1}), 413, text="max_tokens = 2"
    )
    assert small.post("/api/v1/attention", json={"tokens": [[1.0]] * 2, "heads": 1}).status_code == 200


def test_body_over_the_size_limit_is_413(app_config):
    from service.app import create_app

    small = create_app({**app_config, "max_content_length": 1000}).test_client()
    body = {"tokens": [[0.123456789] * 8] * 20, "heads": 2}
    assert_problem(small.post("/api/v1/attention", json=body), 413)


def test_finite_inputs_that_overflow_are_422_saying_so(client):
    response = client.post("/api/v1/attention", json={"tokens": [[1e200, 1e200], [1e200, -1e200]], "heads": 1})
    assert_problem(response, 422, field="tokens", text="overflowed")


def test_huge_projection_overflow_is_422(client):
    body = {"tokens": [[1e300, 1.0]], "heads": 1, "projections": {"query": [[1e300, 0], [0, 1]]}}
    assert_problem(client.post("/api/v1/attention", json=body), 422, text="overflowed")


def test_responses_never_contain_nan(client):
    # Extreme but computable logits: the stable softmax must keep every number finite.
    body = {"tokens": [[700.0, -700.0], [-700.0, 700.0], [1e-300, 0.0]], "heads": 1, "causal": False}
    response = client.post("/api/v1/attention", json=body)
    assert response.status_code == 200
    numbers = list(_numbers({k: v for k, v in response.json.items() if k != "conventions"}))
    assert len(numbers) > 50
    assert numbers and all(isinstance(v, (int, float)) and math.isfinite(v) for v in numbers)


def _numbers(node, key=None):
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _numbers(v, k)
    elif isinstance(node, list):
        for v in node:
            if not (v is None and key == "masked_scores"):
                yield from _numbers(v, key)
    elif node is None or isinstance(node, (int, float)):
        yield node


BEFORE_YEAR_ONE = "0001-01-01T00:00:00+00:01"  # valid ISO 8601, but a minute before year 1 in UTC


@pytest.mark.parametrize(
    "method, path, body, field",
    [
        ("get", f"/api/v1/analytics/events/timeseries?from={BEFORE_YEAR_ONE}", None, "from"),
        ("get", f"/api/v1/xapi/statements?since={BEFORE_YEAR_ONE}", None, "since"),
        ("post", "/api/v1/events", "event", "occurred_at"),
    ],
)
def test_a_date_time_with_no_utc_equivalent_is_422_not_500(client, acme, method, path, body, field):
    from ..api.helpers import event

    payload = event(occurred_at=BEFORE_YEAR_ONE) if body == "event" else None
    response = getattr(client, method)(path.replace("+", "%2B"), json=payload, headers=acme)
    assert_problem(response, 422, text="outside the range of dates")
    assert field in str(response.json["errors"])
