"""The edge (service/edge) in front of every request: a route's fast handler answers exactly as
its view would (the same status, bytes and headers), the rate limit is counted once, whatever
the fast handler is not sure of is answered by the view; and what is added the ordinary way (a
header hook, a route's limit) holds for the fast answers too."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text
from werkzeug.http import parse_cookie

from service.app import create_app
from service.edge import edge, rate_limit
from service.presets import presets

from ..api.helpers import LESSON, completed, event

URL = "/api/v1/attention"
WORKBENCH = presets()["workbench"]["request"]
VARYING = {"X-Request-Id", "X-RateLimit-Remaining", "X-RateLimit-Reset", "Set-Cookie", "Date"}


class Paths:
    """Ask the same app with its fast handlers, or with its views only, and tell which answered
    (`full_calls`: the requests that reached Flask)."""

    def __init__(self, app):
        self.app = app
        self.edge = edge(app)
        self.flask = self.edge.flask
        self.full_calls = 0

        def counted(environ, start_response):
            self.full_calls += 1
            return self.flask(environ, start_response)

        self.edge.flask = counted
        self.client = app.test_client()

    def post(self, path: str, body=None, *, data=None, full: bool = False, **kwargs):
        self.edge.use_fast = not full
        try:
            if body is not None:
                data = json.dumps(body)
                kwargs.setdefault("content_type", "application/json")
            return self.client.post(path, data=data, **kwargs)
        finally:
            self.edge.use_fast = True

    def both(self, body=None, path: str = URL, **kwargs):
        """(the fast answer, the view's answer, whether the fast handler answered without Flask)."""
        before = self.full_calls
        lean = self.post(path, body, **kwargs)
        answered_lean = self.full_calls == before
        return lean, self.post(path, body, full=True, **kwargs), answered_lean


@pytest.fixture
def paths(app):
    return Paths(app)


def assert_same(lean, full):
    assert lean.status_code == full.status_code
    assert lean.data == full.data
    headers = lambda r: sorted((k, v) for k, v in r.headers.items() if k not in VARYING)  # noqa: E731
    assert headers(lean) == headers(full)
    assert {k for k, _ in lean.headers.items()} == {k for k, _ in full.headers.items()}


@pytest.mark.parametrize(
    "body",
    [
        WORKBENCH,
        {**WORKBENCH, "failure_mode": "reuse_first_slice"},
        {**WORKBENCH, "failure_mode": None, "causal": False},
        {"tokens": [[1, 2, 3, 4, 5, 6, 7, 8]], "heads": 4},  # integers, one position
        {"tokens": [[0.1 * i - 0.7 * j for i in range(8)] for j in range(6)], "heads": 2, "causal": True},
    ],
)
def test_what_the_workbench_sends_is_answered_at_the_edge_with_the_views_bytes(paths, body):
    lean, full, answered_lean = paths.both(body)
    assert answered_lean and lean.status_code == 200
    assert_same(lean, full)


@pytest.mark.parametrize(
    "body, kwargs",
    [
        ({**WORKBENCH, "heads": 0}, {}),
        ({**WORKBENCH, "heads": 3}, {}),  # does not divide d_model: the engine's 422
        ({**WORKBENCH, "heads": True}, {}),
        ({**WORKBENCH, "heads": "2"}, {}),
        ({**WORKBENCH, "causal": None}, {}),
        ({**WORKBENCH, "failure_mode": "no_such_mode"}, {}),
        ({**WORKBENCH, "tokens": [[1.0, 2.0], [3.0]]}, {}),
        ({**WORKBENCH, "tokens": [[1.0, True, 0.0, 0.0]]}, {}),
        ({**WORKBENCH, "tokens": []}, {}),
        ({**WORKBENCH, "precision": 2}, {}),  # a field the lean path leaves to the schema
        ({**WORKBENCH, "surprise": 1}, {}),
        ({"tokens": [[0.5] * 64] * 32, "heads": 4}, {}),  # 4,096+ cells: charged to a budget, full path
        ([1, 2], {}),
        (WORKBENCH, {"headers": {"Accept": "application/octet-stream"}}),
        (WORKBENCH, {"query_string": "x=1"}),
        (None, {"data": b'{"tokens": [[1, 2]], "heads": 1', "content_type": "application/json"}),
        (None, {"data": b"", "content_type": "application/json"}),
        (None, {"data": json.dumps(WORKBENCH), "content_type": "text/plain"}),
        (None, {"data": b'{"heads": 2, "heads": 2, "tokens": [[1, 2, 3, 4]]}', "content_type": "application/json"}),
    ],
)
def test_anything_else_gets_the_views_answer_exactly(paths, body, kwargs):
    """What the fast handler is not sure of goes to the view; what it refuses (the engine's 422, a
    body that is not JSON) it refuses with the view's own problem."""
    lean, full, answered_lean = paths.both(body, **kwargs)
    if lean.status_code != 200:
        assert lean.mimetype == "application/problem+json"
    assert_same(lean, full)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.fixed_dictionaries(
        {
            "tokens": st.lists(
                st.lists(st.one_of(st.integers(-5, 5), st.floats(-1e3, 1e3), st.booleans()), min_size=4, max_size=4),
                min_size=1,
                max_size=4,
            ),
            "heads": st.one_of(st.integers(-1, 5), st.just(2.0)),
        },
        optional={
            "causal": st.one_of(st.booleans(), st.none()),
            "failure_mode": st.sampled_from([None, "reuse_first_slice", "x"]),
        },
    )
)
def test_random_bodies_get_the_same_answer_on_both_paths(paths, body):
    assert_same(*paths.both(body)[:2])


def test_a_request_id_is_echoed_or_made(paths):
    lean, _, answered_lean = paths.both(WORKBENCH, headers={"X-Request-Id": "trace-1234abcd"})
    assert answered_lean and lean.headers["X-Request-Id"] == "trace-1234abcd"
    lean, _, _ = paths.both(WORKBENCH, headers={"X-Request-Id": "bad id!"})
    assert len(lean.headers["X-Request-Id"]) == 32 and lean.headers["X-Request-Id"] != "bad id!"


def test_the_session_cookie_is_renewed_when_a_page_loads_not_on_every_answer(paths):
    first = paths.client.post("/api/v1/session")
    assert first.status_code == 201 and "Set-Cookie" in first.headers
    lean, full, answered_lean = paths.both(WORKBENCH)
    assert answered_lean and "Set-Cookie" not in lean.headers and "Set-Cookie" not in full.headers
    assert_same(lean, full)
    again = paths.client.post("/api/v1/session")  # every page calls it on load
    cookie = parse_cookie(again.headers["Set-Cookie"])
    decode = paths.app.session_interface.get_signing_serializer(paths.app).loads
    assert decode(cookie["workbench_session"])["learner"] == first.get_json()["learner"]
    assert "Expires" in again.headers["Set-Cookie"]


def test_a_cookie_that_does_not_verify_counts_as_none(paths):
    paths.client.set_cookie("workbench_session", "forged.value.sig")
    lean, full, answered_lean = paths.both(WORKBENCH)
    assert answered_lean
    assert_same(lean, full)


@pytest.fixture
def limited(app_config):
    app = create_app(
        {**app_config, "ratelimit_enabled": True, "ratelimit_key": "5/minute", "ratelimit_learner": "3/minute"}
    )
    yield Paths(app)
    app.extensions["db"].dispose()


def test_the_rate_limit_is_counted_once_per_request_whoever_answers(limited):
    answers = [limited.post(URL, WORKBENCH, full=(i == 1)) for i in range(4)]
    assert [a.status_code for a in answers] == [200, 200, 200, 429]
    assert [a.headers.get("X-RateLimit-Remaining") for a in answers[:3]] == ["2", "1", "0"]
    assert {a.headers["X-RateLimit-Limit"] for a in answers[:3]} == {"3"}
    assert limited.full_calls == 1  # the view answered the one it was asked; the edge refused the fourth
    assert answers[3].mimetype == "application/problem+json" and int(answers[3].headers["Retry-After"]) > 0


def test_a_key_is_read_from_the_database_once_then_known_to_this_worker(limited, make_key, monkeypatch):
    from service.edge import caller

    headers = make_key("acme")
    reads = []
    real = caller.authenticate
    monkeypatch.setattr(caller, "authenticate", lambda conn, token: reads.append(token) or real(conn, token))
    first = limited.post(URL, WORKBENCH, headers=headers)
    second = limited.post(URL, WORKBENCH, headers=headers)
    assert limited.full_calls == 0 and len(reads) == 1  # the edge verified it once, and answered both
    assert first.headers["X-RateLimit-Limit"] == "5"
    assert second.headers["X-RateLimit-Limit"] == "5" and second.headers["X-RateLimit-Remaining"] == "3"
    made_up = {"Authorization": "Bearer wb_madeupxx_" + "0" * 40}
    limited.post(URL, WORKBENCH, headers=made_up)
    limited.post(URL, WORKBENCH, headers=made_up)
    assert len(reads) == 3  # a key that did not verify is never trusted from a cache


@pytest.mark.parametrize("app_config_cors", [("https://lms.example",)])
def test_a_cross_origin_call_gets_cors_headers_on_either_path(app_config, app_config_cors):
    app = create_app({**app_config, "cors_origins": list(app_config_cors)})
    paths = Paths(app)
    lean, full, answered_lean = paths.both(WORKBENCH, headers={"Origin": "https://lms.example"})
    assert answered_lean and lean.headers["Access-Control-Allow-Origin"] == "https://lms.example"
    assert_same(lean, full)
    app.extensions["db"].dispose()


def test_a_browser_learner_counts_against_their_own_limit_not_their_address(limited):
    learner = limited.app.test_client()
    assert learner.post("/api/v1/session").status_code in (200, 201)
    limited.client, limited.full_calls = learner, 0
    first = limited.post(URL, WORKBENCH)
    second = limited.post(URL, WORKBENCH)
    assert limited.full_calls == 0, "the edge knows the session and the fast handler answers"
    assert [first.headers["X-RateLimit-Remaining"], second.headers["X-RateLimit-Remaining"]] == ["2", "1"]
    limited.client = (
        limited.app.test_client()
    )  # no cookie: the address's count, which starting the session spent one of
    assert limited.post(URL, WORKBENCH).headers["X-RateLimit-Remaining"] == "1"


# -- events ----------------------------------------------------------------------------------

EVENTS = "/api/v1/events"


def known_key(paths, make_key, scopes="events:write,progress:read"):
    """A key this worker has verified once (through the full path), as platforms' keys are."""
    headers = make_key("acme", scopes)
    paths.post(EVENTS, event(), headers=headers, full=True)
    return headers


@pytest.mark.databases
def test_a_platforms_events_are_recorded_at_the_edge(paths, make_key, db):
    headers = known_key(paths, make_key)
    single, batch = event(), {"events": [event(learner=f"l-{i}") for i in range(3)]}
    for body in (single, batch):
        before = paths.full_calls
        created = paths.post(EVENTS, body, headers=headers)
        assert paths.full_calls == before and created.status_code == 201
        # the same events again, on each path: identical replays, answered identically
        lean_replay, full_replay, answered_lean = paths.both(body, path=EVENTS, headers=headers)
        assert answered_lean and lean_replay.status_code == 200
        assert_same(lean_replay, full_replay)
    with db.read() as session:
        assert session.execute(text("SELECT count(*) FROM events")).scalar_one() == 1 + 1 + 3


def test_a_completed_checkpoint_is_reported_as_on_the_full_path(paths, make_key):
    headers = known_key(paths, make_key)
    body = {"events": [event(learner="ada"), completed("explain", learner="ada")]}
    lean = paths.post(EVENTS, body, headers=headers)
    assert lean.status_code == 201
    assert {"learner": "ada", "lesson": LESSON, "checkpoint": "explain"} in lean.get_json()["completed"]


@pytest.mark.parametrize(
    "body",
    [
        event(lesson="no-such-lesson"),
        event(id="not-a-uuid"),
        {**event(), "stored_at": "2026-01-01T00:00:00Z"},
        {"events": []},
        {"events": [event(), {**event(), "surprise": True}]},
        {**completed("implement"), "data": {"tests": {"passed": 3, "failed": 1}}},  # tests must all pass
        event(occurred_at="2999-01-01T00:00:00+00:00"),
    ],
)
def test_events_that_are_refused_get_the_views_answer_exactly(paths, make_key, body):
    headers = known_key(paths, make_key)
    lean, full, answered_lean = paths.both(body, path=EVENTS, headers=headers)
    assert lean.status_code >= 400
    assert_same(lean, full)


@pytest.mark.databases
def test_a_conflicting_replay_is_refused_with_the_full_paths_409_and_nothing_stored(paths, make_key, db):
    headers = known_key(paths, make_key)
    original = event()
    paths.post(EVENTS, original, headers=headers)
    changed = {**original, "data": {"parameter": "token", "value": 9}}
    lean, full, answered_lean = paths.both({"events": [event(), changed]}, path=EVENTS, headers=headers)
    assert answered_lean and lean.status_code == 409
    assert_same(lean, full)
    with db.read() as session:
        assert session.execute(text("SELECT count(*) FROM events")).scalar_one() == 2  # the warm-up and the original


@pytest.mark.parametrize(
    "headers", [{}, {"Authorization": "Bearer wb_unknown1_" + "x" * 40}, {"Authorization": "Basic eDp5"}]
)
def test_callers_without_a_valid_key_get_the_views_401(paths, headers):
    lean, full, answered_lean = paths.both(event(), path=EVENTS, headers=headers)
    assert lean.status_code == 401
    assert answered_lean == bool(headers)  # credentials that are wrong are refused before the body is read
    assert_same(lean, full)


def test_a_key_without_the_scope_gets_the_views_403(paths, make_key):
    headers = make_key("acme", "progress:read")
    paths.post(EVENTS, event(), headers=headers, full=True)  # known to this worker now
    lean, full, answered_lean = paths.both(event(), path=EVENTS, headers=headers)
    assert not answered_lean and lean.status_code == 403
    assert_same(lean, full)


def test_a_browser_learner_records_their_own_events_at_the_edge(paths):
    learner = paths.client.post("/api/v1/session").get_json()["learner"]
    before = paths.full_calls
    created = paths.post(EVENTS, event(learner=learner))
    assert paths.full_calls == before and created.status_code == 201
    lean, full, answered_lean = paths.both(event(learner="someone-else"), path=EVENTS)
    assert lean.status_code == 403  # refused at the edge with the view's own problem
    assert_same(lean, full)


def test_an_event_over_the_limit_is_refused_and_not_stored(limited, make_key, db):
    headers = make_key("acme")
    limited.post(EVENTS, event(), headers=headers, full=True)  # the key becomes known: 1 of 5
    statuses = [limited.post(EVENTS, event(), headers=headers).status_code for _ in range(5)]
    assert statuses == [201, 201, 201, 201, 429]
    with db.read() as session:
        assert session.execute(text("SELECT count(*) FROM events")).scalar_one() == 5


def test_an_event_the_lesson_refuses_counts_once(limited, make_key):
    headers = make_key("acme")
    limited.post(EVENTS, event(), headers=headers, full=True)  # the key becomes known: 1 of 5
    refused = {**completed("implement"), "data": {"tests": {"passed": 3, "failed": 1}}}  # tests must all pass
    answer = limited.post(EVENTS, refused, headers=headers)
    assert answer.status_code == 422
    assert (answer.headers["X-RateLimit-Limit"], answer.headers["X-RateLimit-Remaining"]) == ("5", "3")
    assert limited.post(EVENTS, event(), headers=headers).headers["X-RateLimit-Remaining"] == "2"


def test_a_database_past_its_busy_timeout_gets_the_views_503_after_one_wait(app_config, make_key):
    import sqlite3
    import time

    import sqlalchemy

    if not app_config["database_url"].startswith("sqlite"):
        pytest.skip("SQLite's writer lock")
    app = create_app({**app_config, "sqlite_busy_timeout_ms": 300})
    paths = Paths(app)
    headers = known_key(paths, make_key)
    # Each attempt to take the writer's lock is counted, not timed (a loaded CI machine stretches
    # one wait past two): the statements every new connection runs are traced from here on.
    waits = []
    app.extensions["db"].dispose()
    sqlalchemy.event.listen(
        app.extensions["db"].engine,
        "connect",
        lambda dbapi, _record: dbapi.set_trace_callback(
            lambda sql: waits.append(sql) if sql.startswith("BEGIN IMMEDIATE") else None
        ),
    )
    holder = sqlite3.connect(app_config["database_url"].split("///", 1)[1], isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        started = time.monotonic()
        lean = paths.post(EVENTS, event(), headers=headers)
        waited = time.monotonic() - started
        lean_waits, waits[:] = list(waits), []
        full = paths.post(EVENTS, event(), headers=headers, full=True)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        app.extensions["db"].dispose()
    assert lean.status_code == 503 and lean.headers["Retry-After"] == full.headers["Retry-After"]
    assert lean.mimetype == full.mimetype == "application/problem+json"
    assert lean.get_json() == full.get_json()
    assert lean_waits == ["BEGIN IMMEDIATE"], "the request waited for the database more than once"
    assert waits == ["BEGIN IMMEDIATE"]
    assert waited >= 0.3  # it did wait the busy timeout before giving up


# -- what is added the ordinary way holds on both paths ---------------------------------------


def test_a_header_hook_and_a_routes_limit_hold_for_the_fast_answers_too(app_config):
    app = create_app({**app_config, "ratelimit_enabled": True})
    paths = Paths(app)
    edge(app).after(lambda environ, headers: headers.append(("X-Course", "multi-head")))
    edge(app).limit("attention.Attention", "POST", "2/minute")
    answers = [paths.post(URL, WORKBENCH) for _ in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 429] and paths.full_calls == 0
    assert all(a.headers["X-Course"] == "multi-head" for a in answers)
    assert "on this route" in answers[2].get_json()["detail"]
    other = paths.post("/api/v1/attention/compare", {**WORKBENCH, "failure_mode": "no_scaling"})
    assert other.status_code == 200 and other.headers["X-Course"] == "multi-head"  # the limit is the route's own
    app.extensions["db"].dispose()


def test_a_limit_declared_on_a_view_is_counted_at_the_edge(app_config):
    from flask.views import MethodView

    from service.api.smorest import Blueprint

    app = create_app({**app_config, "ratelimit_enabled": True})
    blp = Blueprint("probe", __name__, url_prefix="/api/v1/probe")

    @blp.route("")
    class Probe(MethodView):
        @rate_limit("1/minute")
        def get(self):
            return {"ok": True}

    app.extensions["api"].register_blueprint(blp)
    client = app.test_client()
    assert [client.get("/api/v1/probe").status_code for _ in range(2)] == [200, 429]
    app.extensions["db"].dispose()


def test_routes_are_remembered_by_path_within_a_bound_and_each_method_alone(app, monkeypatch):
    import service.edge as edge_module

    monkeypatch.setattr(edge_module, "MATCHES_KEPT", 8)
    client = app.test_client()
    assert client.post(URL, json=WORKBENCH).status_code == 200
    assert client.get(URL).status_code == 405  # the same path, another method: not the POST's route
    assert client.post(URL, json=WORKBENCH).status_code == 200
    for i in range(20):  # paths with ids do not repeat: the memory stays bounded
        client.get(f"/api/v1/learners/learner-{i}/progress")
    assert len(edge(app).matched) <= 8
    assert client.get("/api/v1/learners/learner-3/progress").status_code == 401  # still routed as before
