"""service.db.analytics, called directly, against plain-Python recomputations from the same
random events: the funnel, time to complete, parameters, token cells and mistakes."""

from __future__ import annotations

import datetime as dt
import random
import uuid
from collections import Counter, defaultdict

import numpy as np
import pytest

from service.db import analytics as q
from service.db.analytics import funnel as progress_q
from service.db.challenges import add_check
from service.db.events import NewEvent, record_events
from service.db.platforms import ensure_platform

pytestmark = pytest.mark.databases
LESSON = "multi-head-attention"
CHECKPOINTS = ["predict", "experiment", "implement", "explain"]
MANIPULATIONS = ["last-two", "first-two", "causal-mask", "broken-reuse"]
T0 = dt.datetime(2026, 11, 20, tzinfo=dt.UTC)


def cohort(seed: int, learners: int = 40) -> list[NewEvent]:
    """Learners who go through the checkpoints in order and drop out at random."""
    rng = random.Random(seed)
    events = []
    for n in range(learners):
        learner, t = f"l{n}", T0 + dt.timedelta(hours=rng.uniform(0, 72))

        def add(event, checkpoint, data, instance=None):
            nonlocal t
            t += dt.timedelta(minutes=rng.uniform(0.5, 20))
            events.append(NewEvent(str(uuid.uuid4()), learner, LESSON, checkpoint, event, instance, data, t))  # noqa: B023

        add("started", None, {})
        for checkpoint in CHECKPOINTS:
            if rng.random() < 0.25:
                break
            if checkpoint == "experiment":  # free changes and the lesson's four manipulations, some repeated
                for _ in range(rng.randint(1, 6)):
                    data = {
                        "parameter": "token",
                        "token": rng.randint(1, 3),
                        "dimension": rng.randint(1, 4),
                        "value": 1.0,
                    }
                    if rng.random() < 0.7:
                        data["manipulation"] = rng.choice(MANIPULATIONS)
                    add("parameter-changed", "experiment", data, "multi-head-workbench")
            elif checkpoint == "implement":
                add("completed", "implement", {"tests": {"passed": 3, "failed": 0}})
            else:
                add("completed", checkpoint, {"text": "words"})
    return events


@pytest.fixture
def stored(db, app):
    with db.write() as session:
        platform = ensure_platform(session, "acme").id
    events = cohort(7)
    record_events(db, platform, events, app.extensions["lessons"])
    return platform, events


def completions(events):
    """learner -> checkpoint -> first completion time, computed from the raw events (the
    experiment: when the last of its four manipulations was first done)."""
    done: dict[str, dict[str, dt.datetime]] = defaultdict(dict)
    firsts: dict[str, dict[str, dt.datetime]] = defaultdict(dict)
    for e in sorted(events, key=lambda e: e.occurred_at):
        if e.event == "completed":
            done[e.learner].setdefault(e.checkpoint, e.occurred_at)
        elif e.event == "parameter-changed" and "manipulation" in e.data:
            firsts[e.learner].setdefault(e.data["manipulation"], e.occurred_at)
    for learner, first in firsts.items():
        if len(first) == len(MANIPULATIONS):
            done[learner]["experiment"] = max(first.values())
    return done


def test_the_funnel_equals_a_recount_of_the_raw_events(db, stored):
    platform, events = stored
    done = completions(events)
    with db.read() as session:
        funnel = progress_q.funnel(session, platform, LESSON, CHECKPOINTS)
    assert funnel["started"] == len({e.learner for e in events})
    expected = {c: sum(c in d for d in done.values()) for c in CHECKPOINTS}
    assert funnel["completed"] == expected and expected["predict"] > expected["explain"] > 0
    for previous, current in zip(CHECKPOINTS, CHECKPOINTS[1:], strict=False):
        assert funnel["after_previous"][current] == sum(previous in d and current in d for d in done.values())


def test_durations_equal_numpy_quantiles_of_the_raw_times(db, stored):
    platform, events = stored
    first = {}
    for e in sorted(events, key=lambda e: e.occurred_at):
        first.setdefault(e.learner, e.occurred_at)
    seconds = [  # reported in whole seconds
        int((d["implement"] - first[learner]).total_seconds())
        for learner, d in completions(events).items()
        if "implement" in d
    ]
    with db.read() as session:
        count, values = progress_q.durations(session, platform, LESSON, "implement", (0.5, 0.9))
    assert count == len(seconds) > 5
    np.testing.assert_allclose(values, np.quantile(seconds, [0.5, 0.9]), rtol=1e-9)


def test_parameters_and_token_cells_equal_a_recount(db, stored):
    platform, events = stored
    changes = [e for e in events if e.event == "parameter-changed"]
    with db.read() as session:
        parameters = q.parameters(session, platform, LESSON)
        cells = q.token_cells(session, platform, LESSON)
    assert [(p, n, learners) for p, n, learners in parameters] == [
        ("token", len(changes), len({e.learner for e in changes}))
    ]
    expected = Counter((e.data["token"], e.data["dimension"]) for e in changes)
    assert {(t, d): n for t, d, n, _ in cells} == expected and sum(expected.values()) == len(changes)
    learners = {
        cell: {e.learner for e in changes if (e.data["token"], e.data["dimension"]) == cell} for cell in expected
    }
    assert {(t, d): people for t, d, _, people in cells} == {cell: len(who) for cell, who in learners.items()}


def test_mistakes_count_checks_and_distinct_learners(db, stored):
    platform, _ = stored
    with db.write() as session:
        for learner, mistakes in [("l1", ["no_scaling"]), ("l1", ["no_scaling"]), ("l2", ["no_scaling", "no_mask"])]:
            add_check(session, platform, learner, LESSON, {}, False, 0.5, mistakes)
        add_check(session, platform, "l3", LESSON, {}, True, 0.0, [])
    with db.read() as session:
        found = q.mistakes(session, platform, LESSON)
    assert found == {"no_scaling": (3, 2), "no_mask": (1, 1)}
