"""POST /events: exactly once, atomic batches, the lesson's completion rules, strict bounds."""

import pytest
from sqlalchemy import func, select

from service.db.tables import CheckpointProgress, Event

from .helpers import LESSON, at, completed, event, experiment

pytestmark = pytest.mark.databases


def count_events(db) -> int:
    with db.read() as s:
        return s.scalar(select(func.count()).select_from(Event))


def progress(client, headers, learner="learner-1"):
    response = client.get(f"/api/v1/learners/{learner}/progress?lesson={LESSON}", headers=headers)
    assert response.status_code == 200, response.json
    return {c["id"]: c for c in response.json["lessons"][0]["checkpoints"]}


def test_new_event_is_201_and_stored(client, db, acme):
    body = event()
    response = client.post("/api/v1/events", json=body, headers=acme)
    assert response.status_code == 201
    assert response.json["events"] == [{"id": body["id"], "status": "created"}]
    assert count_events(db) == 1


def test_identical_replay_returns_200_and_writes_nothing(client, db, acme):
    body = event()
    client.post("/api/v1/events", json=body, headers=acme)
    again = client.post("/api/v1/events", json=body, headers=acme)
    assert again.status_code == 200
    assert again.json["events"] == [{"id": body["id"], "status": "duplicate"}]
    assert count_events(db) == 1


def test_replay_with_an_equivalent_timestamp_is_still_identical(client, db, acme):
    body = event(occurred_at="2026-11-29T10:00:00+01:00")
    client.post("/api/v1/events", json=body, headers=acme)
    same_instant = client.post("/api/v1/events", json={**body, "occurred_at": "2026-11-29T09:00:00Z"}, headers=acme)
    assert same_instant.status_code == 200


def test_same_id_different_content_is_409_and_the_stored_event_is_unchanged(client, acme):
    body = event(data={"value": 1})
    client.post("/api/v1/events", json=body, headers=acme)
    response = client.post("/api/v1/events", json={**body, "data": {"value": 2}}, headers=acme)
    assert response.status_code == 409
    assert response.json["conflicts"] == [body["id"]]
    stored = client.get("/api/v1/learners/learner-1/events", headers=acme).json["events"]
    assert [e["data"] for e in stored] == [{"value": 1}]


def test_batch_is_atomic_when_one_event_conflicts(client, db, acme):
    first = event()
    client.post("/api/v1/events", json=first, headers=acme)
    batch = [event(), event(), {**first, "event": "started"}]
    response = client.post("/api/v1/events", json={"events": batch}, headers=acme)
    assert response.status_code == 409
    assert count_events(db) == 1


def test_batch_is_atomic_when_one_event_is_invalid(client, db, acme):
    batch = [event(), event(), event(checkpoint="nonexistent")]
    response = client.post("/api/v1/events", json={"events": batch}, headers=acme)
    assert response.status_code == 422
    assert "events.2.checkpoint" in response.json["errors"]
    assert count_events(db) == 0


def test_batch_of_new_and_replayed_events_is_201_with_each_status(client, acme):
    old = event()
    client.post("/api/v1/events", json=old, headers=acme)
    new = event()
    response = client.post("/api/v1/events", json={"events": [old, new]}, headers=acme)
    assert response.status_code == 201
    assert {e["id"]: e["status"] for e in response.json["events"]} == {old["id"]: "duplicate", new["id"]: "created"}


def test_duplicate_ids_inside_one_batch_are_400(client, db, acme):
    body = event()
    response = client.post("/api/v1/events", json={"events": [body, dict(body)]}, headers=acme)
    assert response.status_code == 400
    assert body["id"] in response.json["detail"]
    assert count_events(db) == 0


def test_batch_over_the_cap_is_413(app_config, make_key):
    from service.app import create_app

    small = create_app({**app_config, "max_batch_events": 3})
    client = small.test_client()
    from service.db.platforms import create_key

    with small.extensions["db"].write() as s:
        key, _ = create_key(s, "acme", frozenset({"events:write"}))
    response = client.post(
        "/api/v1/events", json={"events": [event() for _ in range(4)]}, headers={"Authorization": f"Bearer {key.token}"}
    )
    assert response.status_code == 413 and "max_batch_events" in response.json["limits"]


@pytest.mark.parametrize(
    "overrides, field, text",
    [
        ({"lesson": "astrology"}, "lesson", "unknown lesson"),
        ({"checkpoint": "dance"}, "checkpoint", "has no checkpoint"),
        ({"event": "teleported"}, "event", "Must be one of"),
        ({"id": "not-a-uuid"}, "id", "UUID"),
        ({"learner": ""}, "learner", None),
        ({"learner": "x" * 129}, "learner", None),
        ({"learner": "bad id with spaces"}, "learner", "letters, digits"),
        ({"learner": "nul\u0000"}, "learner", "NUL"),
        ({"data": {"note": "nul\u0000"}}, "data", "NUL"),
        ({"data": {"blob": "x" * 9000}}, "data", "8192 bytes"),
        ({"data": {"a": {"b": {"c": {"d": {"e": {"f": {"g": 1}}}}}}}}, "data", "levels deep"),
        ({"data": [1, 2]}, "data", None),
        ({"occurred_at": "2026-11-29T10:00:00"}, "occurred_at", None),
        ({"occurred_at": "yesterday"}, "occurred_at", None),
        ({"occurred_at": "2999-01-01T00:00:00Z"}, "occurred_at", "in the future"),
        ({"occurred_at": "1999-01-01T00:00:00Z"}, "occurred_at", "before 2000"),
        ({"stored_at": "2026-11-29T10:00:00Z"}, "stored_at", "set by the server"),
        ({"platform": "globex"}, "platform", "set by the server"),
        ({"favourite_colour": "blue"}, "favourite_colour", "Unknown field"),
        ({"event": "completed", "checkpoint": "predict", "data": {}}, "data", "data.text"),
        (
            {"event": "completed", "checkpoint": "implement", "data": {"tests": {"passed": 3, "failed": 1}}},
            "data",
            "send 'attempted'",
        ),
        ({"event": "completed", "checkpoint": "experiment"}, "event", "not on 'completed'"),
        ({"event": "completed", "checkpoint": None}, "checkpoint", "names the checkpoint"),
    ],
)
@pytest.mark.parametrize("batched", [False, True])
def test_invalid_events_are_422_naming_the_field(client, db, acme, overrides, field, text, batched):
    """One event sent alone names its own fields ("learner"); in a batch, "events.0.learner"."""
    body = {"events": [event(**overrides)]} if batched else event(**overrides)
    response = client.post("/api/v1/events", json=body, headers=acme)
    assert response.status_code == 422, response.json
    assert response.mimetype == "application/problem+json"
    name = f"events.0.{field}" if batched else field
    assert name in response.json["errors"], response.json["errors"]
    if text:
        assert text in str(response.json["errors"][name])
    assert count_events(db) == 0


def test_platform_events_must_name_a_learner(client, acme):
    body = event()
    del body["learner"]
    response = client.post("/api/v1/events", json=body, headers=acme)
    assert response.status_code == 422 and "learner" in response.json["errors"]


# -- completion rules --------------------------------------------------------------------


def test_checkpoints_complete_by_the_lessons_rules(client, acme):
    for body in (completed("predict"), *experiment(), completed("implement"), completed("explain")):
        assert client.post("/api/v1/events", json=body, headers=acme).status_code == 201
    done = progress(client, acme)
    assert len(done) == 4 and all(c["completed"] for c in done.values())


def test_the_experiment_completes_on_its_four_manipulations_not_on_one_change(client, acme):
    first, *rest = experiment(checkpoint=None)
    client.post("/api/v1/events", json=event(), headers=acme)  # a change that is none of the four
    client.post("/api/v1/events", json=first, headers=acme)
    client.post("/api/v1/events", json=first, headers=acme)  # a replay counts once
    state = progress(client, acme)["experiment"]
    assert state["completed"] is False and state["manipulations"] == ["last-two"]
    for body in reversed(rest):  # in any order
        client.post("/api/v1/events", json=body, headers=acme)
    state = progress(client, acme)["experiment"]
    assert state["completed"] is True and state["manipulations"] == [
        "last-two",
        "first-two",
        "causal-mask",
        "broken-reuse",
    ]


def test_an_unknown_manipulation_is_refused_with_the_lessons_list(client, acme, db):
    body = event(data={"parameter": "causal", "value": False, "manipulation": "toggle-everything"})
    response = client.post("/api/v1/events", json=body, headers=acme)
    assert response.status_code == 422
    assert "last-two, first-two, causal-mask, broken-reuse" in response.json["errors"]["data"][0]
    assert count_events(db) == 0


def test_parameter_changed_from_another_instance_does_not_complete_the_experiment(client, acme):
    for body in experiment(instance_id="some-other-widget", checkpoint=None):
        client.post("/api/v1/events", json=body, headers=acme)
    assert progress(client, acme)["experiment"]["completed"] is False
    for body in experiment(checkpoint=None):
        client.post("/api/v1/events", json=body, headers=acme)
    assert progress(client, acme)["experiment"]["completed"] is True


def test_attempted_does_not_complete_the_implement_checkpoint(client, acme):
    body = event(
        checkpoint="implement", event="attempted", instance_id=None, data={"tests": {"passed": 3, "failed": 9}}
    )
    assert client.post("/api/v1/events", json=body, headers=acme).status_code == 201
    assert progress(client, acme)["implement"]["completed"] is False


def test_the_earliest_completion_wins_even_when_it_arrives_later(client, db, acme):
    client.post("/api/v1/events", json=completed("predict", occurred_at=at(5)), headers=acme)
    client.post("/api/v1/events", json=completed("predict", occurred_at=at(30)), headers=acme)  # offline, older
    client.post("/api/v1/events", json=completed("predict", occurred_at=at(1)), headers=acme)
    with db.read() as s:
        rows = s.scalars(select(CheckpointProgress)).all()
    assert len(rows) == 1
    completed_at = progress(client, acme)["predict"]["completed_at"]
    assert completed_at == min(
        e["occurred_at"] for e in client.get("/api/v1/learners/learner-1/events", headers=acme).json["events"]
    )


def test_response_lists_newly_completed_checkpoints(client, acme):
    *three, last = experiment()
    response = client.post("/api/v1/events", json={"events": [completed("predict"), *three]}, headers=acme)
    assert [c["checkpoint"] for c in response.json["completed"]] == ["predict"]
    again = client.post("/api/v1/events", json=last, headers=acme)
    assert again.json["completed"] == [{"learner": "learner-1", "lesson": LESSON, "checkpoint": "experiment"}]


@pytest.mark.parametrize("learner", ["x\n", "\nx", "x\r", "\tx", "x\x00", "x\x0b", "x\u2028"])
@pytest.mark.parametrize("fast", [True, False])
def test_an_id_with_a_control_character_at_either_end_is_refused_and_nothing_stored(
    app, client, db, acme, learner, fast
):
    """Ids are checked with anchors that mean it (\\A...\\Z): "x\\n" was once stored, and could then
    never be read or erased (issue 31)."""
    from service.edge import edge

    edge(app).use_fast = fast
    response = client.post("/api/v1/events", json=event(learner=learner), headers=acme)
    assert response.status_code == 422 and "learner" in response.json["errors"], response.json
    challenge = client.post(
        "/api/v1/exercises/multi-head-attention/challenges", json={"learner": learner}, headers=acme
    )
    assert challenge.status_code == 422
    with db.read() as session:
        assert session.scalar(select(func.count()).select_from(Event)) == 0


@pytest.mark.parametrize(
    "text, says",
    [
        ("x", "at least 12 words"),
        ("I clicked around for a while and then some numbers changed on the screen somewhere", "lesson's words"),
        ("我看到了一些东西", "at least 12 words"),  # eight characters, eight words
        ("head " * 12, "at least 6 different words"),  # one word typed twelve times (issue 65, C6)
        (
            "I saw that only head 2 moved and nothing else happened anywhere on the page today",
            "two of the lesson's words",
        ),
    ],
)
def test_an_explanation_too_short_or_without_the_lessons_words_is_refused_with_a_hint(client, db, acme, text, says):
    refused = client.post("/api/v1/events", json={**completed("explain"), "data": {"text": text}}, headers=acme)
    assert refused.status_code == 422 and says in refused.json["errors"]["data"][0], refused.json
    assert count_events(db) == 0


@pytest.mark.parametrize(
    "text",
    [
        "changing the last two coordinates moved only head 2's weights; reusing one slice makes both heads identical",
        "al cambiar las dos últimas coordenadas solo se movieron los pesos de la cabeza 2 y nada más",
        "只改最后两个坐标时，只有头2的权重变了，头1完全没变",
    ],
)
def test_an_explanation_in_any_of_the_lessons_languages_earns_the_checkpoint(client, acme, text):
    body = {**completed("explain"), "data": {"text": text}}
    assert client.post("/api/v1/events", json=body, headers=acme).status_code == 201
    assert progress(client, acme)["explain"]["completed"]


def test_the_lesson_says_what_earns_its_explain_checkpoint(client):
    rules = {c["id"]: c for c in client.get(f"/api/v1/lessons/{LESSON}?lang=es").json["checkpoints"]}
    assert rules["explain"]["min_words"] == 12 and "cabeza" in rules["explain"]["vocabulary"]["es"]
    assert "min_words" not in rules["predict"]


@pytest.mark.parametrize(
    ("lesson", "text", "says"),
    [
        ("long-context", "x", "asks for a number"),
        ("online-softmax", "many tiles, I think", "asks for a number"),
        ("inside-the-model", "x", "at least 3 words"),
    ],
)
def test_a_prediction_of_the_wrong_kind_is_refused_with_why(client, db, acme, lesson, text, says):
    """A prediction is the kind of answer its prompt asks: a number where it asks a number (issue 65, C6)."""
    body = {**completed("predict"), "lesson": lesson, "data": {"text": text}}
    refused = client.post("/api/v1/events", json=body, headers=acme)
    assert refused.status_code == 422 and says in refused.json["errors"]["data"][0], refused.json
    assert count_events(db) == 0
    body["data"]["text"] = "about 60 GiB with the window, 248 GiB without"
    if lesson == "inside-the-model":
        body["data"]["text"] = "layer 2's induction heads"
    assert client.post("/api/v1/events", json=body, headers=acme).status_code == 201
