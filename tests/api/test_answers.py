"""Answered events: scored by the server from the lesson's keys, never by the client; idempotent
and atomic like every event; progress shows each item's latest answer, and a pre answer's score
only once the item's post answer is in. The predict checkpoint's choice is judged by the engine on
the learner's own edit."""

import numpy as np
import pytest

from service.lessons import load_catalog

from .helpers import LESSON, at, completed, event
from .helpers import answered as answer

pytestmark = pytest.mark.databases

ITEMS = {i.id: i for i in load_catalog("content/lessons")[LESSON].items}


def items_of(client, headers, learner="learner-1"):
    response = client.get(f"/api/v1/learners/{learner}/progress?lesson={LESSON}", headers=headers)
    assert response.status_code == 200, response.json
    return {(a["item"], a["phase"]): a for a in response.json["lessons"][0]["items"]}


def test_an_answer_is_stored_with_the_servers_score_and_shown_with_its_misconception(client, acme):
    wrong = answer("head-shapes", "full-width")
    assert client.post("/api/v1/events", json=wrong, headers=acme).status_code == 201
    stored = client.get("/api/v1/learners/learner-1/events", headers=acme).json["events"]
    assert stored[0]["item"] == "head-shapes" and stored[0]["checkpoint"] is None
    assert stored[0]["data"] == {
        "response": "full-width",
        "phase": "post",
        "correct": False,
        "misconception": ITEMS["head-shapes"].choice("full-width").misconception,
    }
    shown = items_of(client, acme)[("head-shapes", "post")]
    assert shown["correct"] is False and shown["answer"] == ITEMS["head-shapes"].answer
    assert shown["misconception"] == "Each head works on the whole model width"


def test_the_client_cannot_score_its_own_answer(client, acme):
    cheat = answer("head-shapes", "full-width")
    cheat["data"]["correct"] = True
    response = client.post("/api/v1/events", json=cheat, headers=acme)
    assert response.status_code == 422 and "exactly" in response.json["errors"]["data"][0]


def test_the_latest_answer_counts_and_a_replay_is_a_duplicate(client, acme):
    first = answer("head-width", 4, phase="pre", occurred_at=at(10))
    client.post("/api/v1/events", json=first, headers=acme)
    assert client.post("/api/v1/events", json=first, headers=acme).status_code == 200  # replay
    client.post("/api/v1/events", json=answer("head-width", 2, phase="pre", occurred_at=at(5)), headers=acme)
    assert items_of(client, acme)[("head-width", "pre")]["response"] == 2


def test_a_pre_answer_is_scored_for_the_learner_only_once_the_post_answer_is_in(client, acme):
    client.post("/api/v1/events", json=answer("scale", "sqrt-d-model", phase="pre", occurred_at=at(10)), headers=acme)
    pre = items_of(client, acme)[("scale", "pre")]
    assert pre["response"] == "sqrt-d-model" and "correct" not in pre and "answer" not in pre
    client.post("/api/v1/events", json=answer("scale", "sqrt-d-head", occurred_at=at(1)), headers=acme)
    both = items_of(client, acme)
    assert both[("scale", "pre")]["correct"] is False and both[("scale", "post")]["correct"] is True
    assert both[("scale", "pre")]["misconception"] == "Scaling by the model's width instead of the head's"


def test_misconceptions_are_shown_in_the_learners_language(client, acme):
    client.post("/api/v1/events", json=answer("head-shapes", "full-width"), headers=acme)
    response = client.get(
        f"/api/v1/learners/learner-1/progress?lesson={LESSON}", headers={**acme, "Accept-Language": "es"}
    )
    (shown,) = response.json["lessons"][0]["items"]
    assert shown["misconception"] == "Cada cabeza trabaja con todo el ancho del modelo"


def test_a_wrong_number_answer_is_shown_with_its_working_in_the_learners_language(client, acme):
    """Issue 65 (C10): the right number and how it is reached, once the answer is scored for the learner."""
    client.post("/api/v1/events", json=answer("head-width", 4, phase="pre", occurred_at=at(10)), headers=acme)
    assert "working" not in items_of(client, acme)[("head-width", "pre")]  # asked again: nothing shown yet
    client.post("/api/v1/events", json=answer("head-width", 8, phase="post", occurred_at=at(5)), headers=acme)
    shown = items_of(client, acme)[("head-width", "post")]
    assert shown["correct"] is False and shown["answer"] == {"value": 2, "tolerance": 0}
    assert shown["working"] == ITEMS["head-width"].working and shown["working"].endswith("= 2 features.")
    response = client.get(
        f"/api/v1/learners/learner-1/progress?lesson={LESSON}", headers={**acme, "Accept-Language": "es"}
    )
    spanish = {(a["item"], a["phase"]): a for a in response.json["lessons"][0]["items"]}
    assert spanish[("head-width", "pre")]["working"] == "Cada cabeza recibe d_model / H = 8 / 4 = 2 características."


@pytest.mark.parametrize(
    "body, field, text",
    [
        (answer("astrology", "a"), "item", "has no item 'astrology'; its items are: head-width"),
        (answer("head-shapes", "a", phase="during"), "data", "data.phase 'during'"),
        (answer("head-shapes", "right", phase="pre"), "data", "item 'head-shapes' is asked in post"),
        (answer("head-shapes", "maybe"), "data", "data.response is one of this item's choices: right"),
        (answer("head-width", "2", phase="pre"), "data", "data.response is a number"),
        (answer("head-width", 1e300, phase="pre"), "data", "finite number"),
        ({**answer("head-shapes", "right"), "checkpoint": "predict"}, "checkpoint", "names its item, not a checkpoint"),
        ({**answer("head-shapes", "right"), "item": None}, "item", "names the item it is about"),
        ({**event(), "item": "head-shapes"}, "item", "only answered and skipped events name an item"),
        ({**answer("head-shapes", "right"), "data": {"response": "right"}}, "data", "exactly"),
    ],
)
def test_an_answer_that_does_not_fit_its_item_is_422_naming_it_and_nothing_is_stored(client, acme, body, field, text):
    batch = {"events": [answer("head-width", 2, phase="pre"), body]}
    response = client.post("/api/v1/events", json=batch, headers=acme)
    assert response.status_code == 422, response.json
    assert any(text in m for m in response.json["errors"][f"events.1.{field}"]), response.json
    assert client.get("/api/v1/learners/learner-1/events", headers=acme).status_code == 404  # nothing of theirs


def stored_events(client, headers, learner="learner-1"):
    response = client.get(f"/api/v1/learners/{learner}/events", headers=headers)
    return [] if response.status_code == 404 else response.json["events"]


def skip(item: str, **overrides) -> dict:
    return {**answer(item, None, phase="pre", **overrides), "event": "skipped", "data": {"phase": "pre"}}


def test_an_after_answer_without_a_before_answer_is_refused_and_nothing_is_stored(client, acme):
    """The after question shows the key: answered first, the same question before would score what
    was shown. A platform's own client cannot invert the order either."""
    batch = {"events": [answer("head-shapes", "right"), answer("head-width", 2, phase="post")]}
    refused = client.post("/api/v1/events", json=batch, headers=acme)
    assert refused.status_code == 409 and refused.json["type"].endswith("answer-order"), refused.json
    assert list(refused.json["errors"]) == ["events.1"] and "head-width" in refused.json["errors"]["events.1"][0]
    assert stored_events(client, acme) == []


def test_a_batch_is_judged_in_occurred_at_order_whatever_its_order_in_the_list(client, acme):
    after, before = answer("head-width", 2, occurred_at=at(1)), answer("head-width", 4, phase="pre", occurred_at=at(5))
    assert client.post("/api/v1/events", json={"events": [after, before]}, headers=acme).status_code == 201
    late = answer("scale", "sqrt-d-head", phase="pre", occurred_at=at(1))
    early = answer("scale", "sqrt-d-head", occurred_at=at(2))
    refused = client.post("/api/v1/events", json={"events": [late, early]}, headers=acme)
    # each is out of order: the after answer precedes the before one
    assert refused.status_code == 409 and sorted(refused.json["errors"]) == ["events.0", "events.1"]


def test_a_skip_before_opens_the_after_question_and_counts_as_no_answer(client, acme):
    for body in (skip("head-width", occurred_at=at(5)), answer("head-width", 2, occurred_at=at(1))):
        assert client.post("/api/v1/events", json=body, headers=acme).status_code == 201
    shown = items_of(client, acme)
    assert shown[("head-width", "pre")]["skipped"] is True and shown[("head-width", "pre")]["response"] is None
    assert shown[("head-width", "post")]["correct"] is True
    wrong = {**skip("head-width"), "data": {"phase": "post"}}
    assert client.post("/api/v1/events", json=wrong, headers=acme).status_code == 422


def test_once_answered_after_the_before_answer_stands(client, acme):
    client.post("/api/v1/events", json=answer("head-width", 4, phase="pre", occurred_at=at(10)), headers=acme)
    client.post("/api/v1/events", json=answer("head-width", 2, occurred_at=at(5)), headers=acme)
    again = client.post("/api/v1/events", json=answer("head-width", 2, phase="pre", occurred_at=at(1)), headers=acme)
    assert again.status_code == 409 and "already" in again.json["errors"]["events.0"][0]
    assert items_of(client, acme)[("head-width", "pre")]["response"] == 4


def test_answers_stay_with_their_platform(client, acme, globex):
    client.post("/api/v1/events", json=answer("head-shapes", "right", learner="shared-id"), headers=acme)
    response = client.get(f"/api/v1/learners/shared-id/progress?lesson={LESSON}", headers=globex)
    assert response.status_code == 404 or response.json["lessons"][0]["items"] == []


def edit(before, token: int, dimension: int, value: float) -> dict:
    after = [list(row) for row in before]
    after[token - 1][dimension - 1] = value
    return {
        "parameter": "token",
        "token": token,
        "dimension": dimension,
        "value": value,
        "manipulation": "last-two" if dimension >= 3 else "first-two",
        "tokens_before": before,
        "tokens": after,
        "causal": True,
    }


def heads_moved(before, after) -> str:
    """Independently of the engine: a plain softmax(QK^T/sqrt(2)) per head on the raw slices."""
    moved = []
    for h in range(2):
        weights = []
        for x in (np.asarray(before, float), np.asarray(after, float)):
            s = x[:, 2 * h : 2 * h + 2]
            scores = s @ s.T / np.sqrt(2)
            scores[np.triu_indices(len(x), 1)] = -np.inf
            e = np.exp(scores - scores.max(axis=1, keepdims=True))
            weights.append(e / e.sum(axis=1, keepdims=True))
        moved.append(not np.allclose(*weights, atol=1e-12, rtol=0))
    return {(True, True): "both", (True, False): "head-1", (False, True): "head-2"}.get(tuple(moved), "neither")


TOKENS = [[1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 1.0], [1.0, 1.0, 0.0, 0.0]]


@pytest.mark.parametrize("choice", ["head-2", "both"])
def test_the_prediction_is_judged_by_the_engine_on_the_learners_own_edit(client, acme, choice):
    predict = {**completed("predict", occurred_at=at(9)), "data": {"text": "only the second head", "choice": choice}}
    client.post("/api/v1/events", json=predict, headers=acme)
    before = client.get(f"/api/v1/learners/learner-1/progress?lesson={LESSON}", headers=acme).json
    cp = {c["id"]: c for c in before["lessons"][0]["checkpoints"]}["predict"]
    assert cp["prediction"] == {"choice": choice, "observed": None, "held": None}  # no experiment yet
    change = edit(TOKENS, 2, 4, 3.0)
    client.post("/api/v1/events", json=event(data=change, occurred_at=at(5)), headers=acme)
    after = client.get(f"/api/v1/learners/learner-1/progress?lesson={LESSON}", headers=acme).json
    judged = {c["id"]: c for c in after["lessons"][0]["checkpoints"]}["predict"]["prediction"]
    expected = heads_moved(change["tokens_before"], change["tokens"])
    assert expected == "head-2"
    assert judged == {"choice": choice, "observed": expected, "held": choice == expected}


def test_a_prediction_outside_its_choices_is_422(client, acme):
    body = {**completed("predict"), "data": {"text": "hm", "choice": "head-3"}}
    response = client.post("/api/v1/events", json=body, headers=acme)
    assert response.status_code == 422 and "data.choice is one of head-1, head-2, both, neither" in str(response.json)
