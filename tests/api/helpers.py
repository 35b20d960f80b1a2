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


def completed(checkpoint: str, learner: str = "learner-1", **overrides) -> dict:
    data = {"tests": {"passed": 12, "failed": 0}} if checkpoint == "implement" else {"text": "each head is 2 wide"}
    return event(learner, checkpoint=checkpoint, event="completed", instance_id=None, data=data, **overrides)


def at(minutes_ago: float) -> str:
    return (dt.datetime.now(dt.UTC) - dt.timedelta(minutes=minutes_ago)).isoformat()
