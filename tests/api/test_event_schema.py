"""The event schema's fast loader (service/api/schemas/events.py): whatever it accepts loads
exactly as marshmallow's full load of the same schema; whatever it doubts, marshmallow answers,
so every error message is the schema's own."""

from __future__ import annotations

import datetime as dt

import hypothesis
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from marshmallow import Schema, ValidationError

from service.api.schemas.events import EventBatchSchema
from service.api.schemas.fast_events import NOT_SURE, fast_events
from service.edge.problems import Problem

NOW = dt.datetime.now(dt.UTC)
ID = "0b5c3a3e-5d8f-4c59-9a5e-2f1f3b6c7d8e"

uuids = st.one_of(
    st.uuids().map(str),
    st.uuids().map(lambda u: str(u).upper()),
    st.uuids().map(lambda u: u.hex),
    st.uuids().map(lambda u: "{" + str(u) + "}"),
    st.uuids().map(lambda u: "urn:uuid:" + str(u)),
    st.text(max_size=40),
)
moments = st.datetimes(
    min_value=dt.datetime(1999, 1, 1), max_value=dt.datetime(2027, 1, 1), timezones=st.sampled_from([None, dt.UTC])
)
times = st.one_of(
    moments.map(lambda m: m.isoformat()),
    moments.map(lambda m: m.isoformat().replace("+00:00", "Z")),
    moments.map(lambda m: m.isoformat(timespec="milliseconds")),
    moments.map(lambda m: m.date().isoformat()),
    st.just((NOW - dt.timedelta(hours=1)).isoformat()),
    st.just((NOW + dt.timedelta(hours=1)).isoformat()),
    st.just((NOW - dt.timedelta(minutes=3)).astimezone(dt.timezone(dt.timedelta(hours=-5, minutes=-30))).isoformat()),
    st.just("0001-01-01T00:00:00+00:01"),
    st.text(max_size=30),
)
names = st.one_of(
    st.sampled_from(["ada", "multi-head-attention", "experiment", "multi-head-workbench", "a.b:c@d-e_f"]),
    st.text(max_size=140),
    st.just("x" * 129),
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=20,
)
any_value = st.one_of(st.none(), st.integers(), st.booleans(), st.lists(st.integers(), max_size=2), json_values)
fields = {
    "id": st.one_of(uuids, any_value),
    "learner": st.one_of(names, any_value),
    "lesson": st.one_of(names, any_value),
    "checkpoint": st.one_of(names, st.none(), any_value),
    "event": st.one_of(st.sampled_from(["started", "attempted", "completed", "parameter-changed", "done"]), any_value),
    "instance_id": st.one_of(names, st.none(), any_value),
    "data": st.one_of(st.dictionaries(st.text(max_size=8), json_values, max_size=4), any_value),
    "occurred_at": st.one_of(times, any_value),
    "stored_at": times,
    "colour": st.text(max_size=5),
}


valid_name = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._:@-]{0,20}\Z")
recent = st.integers(-(10**9), 4 * 60 * 10**6).map(lambda us: NOW + dt.timedelta(microseconds=us))
valid = {
    "id": st.uuids().map(str),
    "learner": valid_name,
    "lesson": valid_name,
    "checkpoint": st.one_of(st.none(), valid_name),
    "event": st.sampled_from(["started", "attempted", "completed", "parameter-changed"]),
    "instance_id": st.one_of(st.none(), valid_name),
    "data": st.dictionaries(st.text(max_size=8), json_values, max_size=4),
    "occurred_at": st.one_of(
        recent.map(lambda m: m.isoformat()),
        recent.map(lambda m: m.isoformat().replace("+00:00", "Z")),
        recent.map(lambda m: m.astimezone(dt.timezone(dt.timedelta(hours=9))).isoformat(timespec="milliseconds")),
    ),
}


@st.composite
def events(draw):
    keys = draw(st.sets(st.sampled_from(sorted(fields))))
    if draw(st.booleans()):  # mostly well-formed: every required key, mostly valid values
        keys |= {"id", "lesson", "event", "occurred_at"}
        keys -= {"stored_at", "colour"}
        return {k: draw(valid[k] if draw(st.integers(0, 9)) else fields[k]) for k in keys}
    return {k: draw(fields[k]) for k in keys}


bodies = st.one_of(events(), st.builds(lambda es: {"events": es}, st.lists(events(), max_size=3)), any_value)


def full_load(body):
    """marshmallow's own load of the same schema, without the fast path (one event sent alone
    names its fields bare, as the schema reports them)."""
    try:
        return Schema.load(EventBatchSchema(), body)
    except ValidationError as exc:
        if isinstance(body, dict) and "events" not in body and 0 in exc.messages.get("events", {}):
            raise ValidationError(exc.messages["events"][0]) from None
        raise


@settings(max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=bodies)
def test_what_the_fast_loader_accepts_loads_exactly_as_marshmallow_loads_it(app, body):
    with app.test_request_context():
        try:
            fast = fast_events(body, app.extensions["settings"].max_batch_events)
        except NOT_SURE:
            return  # marshmallow answers these
        hypothesis.event("taken by the fast loader")
        try:
            slow = full_load(body)
        except (ValidationError, Problem) as exc:
            pytest.fail(f"the fast loader accepted what marshmallow refuses: {exc}")
        assert {"events": fast} == slow


@pytest.mark.parametrize(
    "body",
    [
        {
            "id": ID,
            "learner": "ada",
            "lesson": "multi-head-attention",
            "event": "started",
            "occurred_at": NOW.isoformat(),
        },
        {
            "events": [
                {
                    "id": ID,
                    "learner": "ada",
                    "lesson": "multi-head-attention",
                    "checkpoint": "experiment",
                    "event": "parameter-changed",
                    "instance_id": "multi-head-workbench",
                    "data": {"parameter": "causal", "value": False},
                    "occurred_at": NOW.isoformat().replace("+00:00", "Z"),
                }
            ]
        },
    ],
)
def test_the_events_platforms_send_take_the_fast_path(app, body):
    with app.test_request_context():
        assert {"events": fast_events(body, app.extensions["settings"].max_batch_events)} == full_load(body)


def test_a_doubtful_body_gets_marshmallows_own_messages(app):
    body = {"id": "not-a-uuid", "lesson": "multi-head-attention", "event": "started", "occurred_at": "yesterday"}
    with app.test_request_context():
        with pytest.raises(ValidationError) as fast_path:
            EventBatchSchema().load(body)
        with pytest.raises(ValidationError) as marshmallow:
            full_load(body)
    assert fast_path.value.messages == marshmallow.value.messages
    assert set(fast_path.value.messages) == {"id", "occurred_at"}  # one event alone: its own field names


def deep(levels: int) -> dict:
    value: dict = {"leaf": 1}
    for _ in range(levels - 1):
        value = {"in": value}
    return value


@pytest.mark.parametrize(
    "data",
    [
        {"text": "a\x00b"},
        {"a\x00": 1},
        {"list": [{"x": ["\x00"]}]},
        {"text": "\\u0000 typed as six characters"},
        deep(6),
        deep(7),
        {"brackets": "[[[[[[[[{{{{{{{{"},
        {"big": "x" * 9000},
    ],
)
def test_data_edge_cases_load_or_fail_exactly_as_marshmallow_decides(app, data):
    body = {"id": ID, "lesson": "multi-head-attention", "event": "started", "occurred_at": NOW.isoformat()}
    body["data"] = data
    with app.test_request_context():
        try:
            expected = full_load(body)
        except ValidationError as exc:
            with pytest.raises(ValidationError) as got:
                EventBatchSchema().load(body)
            assert got.value.messages == exc.messages
        else:
            assert EventBatchSchema().load(body) == expected
