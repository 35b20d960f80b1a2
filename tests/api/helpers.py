"""Building events for the tests."""

from __future__ import annotations

import datetime as dt
import uuid

LESSON = "multi-head-attention"


def event(learner: str = "learner-1", **overrides) -> dict:
    body = {
        "id": str(uuid.uuid4()),
        "learner": learner,
        "lesson": LESSON,
        "checkpoint": "experiment",
        "event": "parameter-changed",
        "instance_id": "multi-head-workbench",
        "data": {"parameter": "token", "token": 1, "dimension": 3, "value": 0.5},
        "occurred_at": dt.datetime.now(dt.UTC).isoformat(),
    }
    body.update(overrides)
    return body


MANIPULATIONS = {
    "last-two": {"parameter": "token", "token": 1, "dimension": 3, "value": 0.5},
    "first-two": {"parameter": "token", "token": 2, "dimension": 1, "value": -1.0},
    "causal-mask": {"parameter": "causal", "value": False},
    "broken-reuse": {"parameter": "reuse_first_slice", "value": True},
}


def experiment(learner: str = "learner-1", **overrides) -> list[dict]:
    """The four manipulations the lesson's experiment checkpoint lists: all four complete it."""
    return [event(learner, data={**data, "manipulation": name}, **overrides) for name, data in MANIPULATIONS.items()]


# An explanation that earns the explain checkpoint: twelve words or more, in the lesson's words.
EXPLANATION = (
    "changing the last two coordinates moved only head 2's weights; reusing one slice makes both heads identical"
)
TEXTS = {"explain": EXPLANATION}


def completed(checkpoint: str, learner: str = "learner-1", **overrides) -> dict:
    text = TEXTS.get(checkpoint, "each head is 2 wide")
    data = {"tests": {"passed": 12, "failed": 0}} if checkpoint == "implement" else {"text": text}
    return event(learner, checkpoint=checkpoint, event="completed", instance_id=None, data=data, **overrides)


def answered(item: str, response, phase: str = "post", learner: str = "learner-1", **overrides) -> dict:
    """An answer to one of the lesson's items (no checkpoint: the item names what is answered)."""
    return event(
        learner,
        checkpoint=None,
        event="answered",
        instance_id=None,
        item=item,
        data={"response": response, "phase": phase},
        **overrides,
    )


def at(minutes_ago: float) -> str:
    return (dt.datetime.now(dt.UTC) - dt.timedelta(minutes=minutes_ago)).isoformat()
