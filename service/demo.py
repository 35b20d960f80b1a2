"""A realistic synthetic cohort: drop-off along the funnel, varied timings, workbench changes,
exercise mistakes. Deterministic per seed (event ids are UUIDv5 of seed and learner), so
running it again stores nothing twice."""

from __future__ import annotations

import datetime as dt
import random
import uuid
import zlib
from collections.abc import Callable, Iterator
from dataclasses import replace

from sqlalchemy import select

from .compute.failure_modes import FAILURE_MODES
from .db import Database, locales
from .db.challenges import add_check
from .db.events import NewEvent, record_events
from .db.platforms import ensure_platform
from .lessons import Lesson
from .lessons.items import Item

LESSON = "multi-head-attention"
NAMESPACE = uuid.UUID("6f1c1c2e-5b0e-4f55-9d7e-3f0b2a9c4d11")
PARAMETERS = [("token", 0.62), ("causal", 0.18), ("reuse_first_slice", 0.14), ("failure_mode", 0.06)]
DEMO_LANGUAGES = ("en",) * 6 + ("es",) * 3 + ("zh-CN",)  # of ten demo learners, by their id's CRC
VERIFIED_SHARE = 0.85  # of demo learners who complete `implement`, the share who do it by a challenge
COMMON_MISTAKES = [
    "interleaved_split",
    "no_scaling",
    "mask_after_softmax",
    "reuse_first_slice",
    "scale_by_d_model",
    "swapped_head_order",
    "no_mask",
    "diagonal_masked",
]


class _Learner:
    """One synthetic learner's clock, events and exercise checks."""

    def __init__(self, learner: str, seed: int, start: dt.datetime, now: dt.datetime):
        self.learner, self.t, self.now = learner, start, now
        self.ids = (str(uuid.uuid5(NAMESPACE, f"{seed}/{learner}/{i}")) for i in range(10_000))
        self.events: list[NewEvent] = []
        self.checks: list[dict] = []

    def add(self, event: str, checkpoint: str | None, data: dict, minutes: float, instance: str | None = None) -> None:
        self.t = min(self.now - dt.timedelta(seconds=1), self.t + dt.timedelta(minutes=minutes))
        self.events.append(NewEvent(next(self.ids), self.learner, LESSON, checkpoint, event, instance, data, self.t))


def cohort(
    learners: int, seed: int, now: dt.datetime, items: tuple[Item, ...] = ()
) -> Iterator[tuple[str, list[NewEvent], list[dict]]]:
    """(learner, their events, their exercise checks) for each synthetic learner; `items`: the
    lesson's questions, answered before the workbench and after it."""
    rng = random.Random(seed)
    for n in range(learners):
        one = _Learner(f"demo-{seed}-{n:06d}", seed, now - dt.timedelta(days=rng.uniform(0.05, 14)), now)
        _walk(rng, one, items)
        yield one.learner, one.events, one.checks


def _walk(rng: random.Random, one: _Learner, items: tuple[Item, ...] = ()) -> None:
    """Through the lesson, dropping out at each step with a plausible probability."""
    one.add("started", None, {}, 0)
    skill = rng.random()
    _answer(rng, one, items, "pre", skill)
    if rng.random() >= 0.9:
        return
    texts = ["2 wide; the second slice is lost", "each head gets 2 features", "width 2, the last two features vanish"]
    one.add("completed", "predict", {"text": rng.choice(texts)}, rng.lognormvariate(1.0, 0.6))
    if rng.random() >= 0.82:
        return
    for data in _experiment(rng):
        one.add("parameter-changed", "experiment", data, rng.lognormvariate(-0.5, 0.8), "multi-head-workbench")
    if rng.random() >= 0.7:
        return
    _answer(rng, one, items, "post", skill)
    # Most learners answer the server's challenges (the path the lesson offers: "verified");
    # some run this platform's own autograder, which reports its results ("reported").
    verified = rng.random() < VERIFIED_SHARE
    challenge = uuid.uuid5(NAMESPACE, f"challenge/{one.learner}").hex
    for _ in range(rng.choice([0, 1, 1, 2, 3])):
        mistakes = rng.choice(
            [
                ["interleaved_split", "no_scaling", "mask_after_softmax"],
                [rng.choice(COMMON_MISTAKES)],
                [rng.choice(COMMON_MISTAKES)],
            ]
        )
        if verified:  # as the server records a wrong answer to a challenge
            attempt = {"verification": "verified", "challenge": challenge, "cases": 3, "mistakes": mistakes}
        else:
            attempt = {"tests": {"passed": rng.randint(2, 6), "failed": len(mistakes)}}
        one.add("attempted", "implement", attempt, rng.lognormvariate(2.0, 0.7))
        one.checks.append({"diagnosis": ",".join(mistakes), "correct": False, "at": one.t})
    if rng.random() >= 0.75:
        return
    solved = (
        {"verification": "verified", "challenge": challenge, "cases": 3}
        if verified
        else {"tests": {"passed": 9, "failed": 0}}
    )
    one.add("completed", "implement", solved, rng.lognormvariate(2.3, 0.6))
    one.checks.append({"diagnosis": None, "correct": True, "at": one.t})
    if rng.random() < 0.72:
        text = "only head 2 changed when I edited the last two features; a swapped head order breaks W_O"
        one.add("completed", "explain", {"text": text}, rng.lognormvariate(1.2, 0.7))


def _answer(rng: random.Random, one: _Learner, items: tuple[Item, ...], phase: str, skill: float) -> None:
    """A learner's answers to the questions of one phase: right more often after the workbench
    and the more skilled they are; a wrong choice is most often the first listed misconception
    (the common one), and a few learners skip a question (before the workbench, a recorded skip)."""
    for item in (i for i in items if i.asked_in(phase)):
        if rng.random() < 0.04:
            if phase == "pre":  # passed over before the workbench: recorded, so the after question opens
                one.add("skipped", None, {"phase": "pre"}, 0.1)
                one.events[-1] = replace(one.events[-1], item=item.id)
            continue
        chance = min(0.97, 0.1 + 0.6 * skill + (0.3 if phase == "post" else 0.0))
        right = rng.random() < chance
        response: str | float
        if item.kind == "number":
            assert item.value is not None
            response = item.value if right else rng.choice([item.value * 2, item.value * 4, 1.0])
        else:
            wrong = [c.id for c in item.choices if c.id != item.answer]
            weights = [4, 2, 1][: len(wrong)] + [1] * (len(wrong) - 3)  # the first misconception is the common one
            response = (item.answer or "") if right else rng.choices(wrong, weights)[0]
        correct, misconception = item.score(response)
        data = {"response": response, "phase": phase, "correct": correct, "misconception": misconception}
        one.add("answered", None, data, rng.lognormvariate(-0.7, 0.5))
        one.events[-1] = replace(one.events[-1], item=item.id)


# The lesson's four manipulations, in its order, and how likely a learner who got to one goes on to it.
MANIPULATIONS: list[tuple[str, dict, float]] = [
    ("last-two", {"parameter": "token", "dimension": 3}, 0.93),
    ("first-two", {"parameter": "token", "dimension": 1}, 0.88),
    ("causal-mask", {"parameter": "causal", "value": False}, 0.9),
    ("broken-reuse", {"parameter": "reuse_first_slice", "value": True}, 0.85),
]


def _experiment(rng: random.Random) -> list[dict]:
    """A learner's workbench changes: free exploration, and the lesson's manipulations as far as they get."""
    changes = [_parameter(rng) for _ in range(rng.randint(0, 10))]
    for manipulation, data, go_on in MANIPULATIONS:
        if rng.random() >= go_on:
            break
        done = {**data, "manipulation": manipulation}
        if data["parameter"] == "token":
            dimension = int(data["dimension"]) + rng.randint(0, 1)
            done.update(token=rng.randint(1, 3), dimension=dimension, value=round(rng.uniform(-2, 2), 1))
        changes.insert(rng.randint(0, len(changes)), done)
    return changes or [_parameter(rng)]


def _parameter(rng: random.Random) -> dict:
    parameter = rng.choices([p for p, _ in PARAMETERS], [w for _, w in PARAMETERS])[0]
    data: dict = {"parameter": parameter}
    if parameter == "token":
        data.update(token=rng.randint(1, 3), dimension=rng.randint(1, 4), value=round(rng.uniform(-2, 2), 1))
    elif parameter == "failure_mode":
        data["value"] = rng.choice(list(FAILURE_MODES)[:6])
    else:
        data["value"] = rng.random() < 0.5
    return data


def load(
    db: Database,
    lessons: dict[str, Lesson],
    learners: int,
    seed: int = 1,
    platform: str = "demo",
    batch: int = 500,
    progress: Callable[[int], None] | None = None,
) -> dict[str, int]:
    """Store the cohort; returns counts of new events, replays and checks."""
    with db.write() as session:
        platform_id = ensure_platform(session, platform).id
    now = _anchor(db, platform_id, seed) or dt.datetime.now(dt.UTC)
    created = replayed = checks = 0
    pending: list[NewEvent] = []
    pending_checks: list[tuple[str, list[dict]]] = []

    def flush() -> None:
        nonlocal created, replayed, checks
        if not pending:
            return
        result = record_events(db, platform_id, pending, lessons)
        created += len(result.created)
        replayed += len(result.replayed)
        checks += _store_checks(db, platform_id, pending, pending_checks, set(result.created))
        with db.write() as session:  # each demo learner reads in a language: most English
            for learner in sorted({e.learner for e in pending}):
                locales.keep(session, platform_id, learner, DEMO_LANGUAGES[zlib.crc32(learner.encode()) % 10], now)
        pending.clear()
        pending_checks.clear()

    items = lessons[LESSON].items if LESSON in lessons else ()
    for learner, events, learner_checks in cohort(learners, seed, now, items):
        pending.extend(events)
        pending_checks.append((learner, learner_checks))
        if len(pending) >= batch:
            flush()
        if progress:
            progress(1)
    flush()
    return {"events_created": created, "events_replayed": replayed, "exercise_checks": checks}


def _store_checks(
    db: Database,
    platform_id: int,
    events: list[NewEvent],
    learners_checks: list[tuple[str, list[dict]]],
    fresh: set[str],
) -> int:
    """The exercise checks of learners whose events were new (a replayed learner's are stored)."""
    stored = 0
    with db.write() as session:
        for learner, items in learners_checks:
            if not items or not any(e.learner == learner and e.event_id in fresh for e in events):
                continue
            for item in items:
                mistakes = item["diagnosis"].split(",") if item["diagnosis"] else []
                error = 0.0 if item["correct"] else 0.3
                add_check(
                    session,
                    platform_id,
                    learner,
                    LESSON,
                    {"tokens": "demo"},
                    item["correct"],
                    error,
                    mistakes,
                    item["at"],
                )
                stored += 1
    return stored


def _anchor(db: Database, platform_id: int, seed: int) -> dt.datetime | None:
    """The `now` of this seed's first run, recovered from its first learner's first event:
    the same seed then rebuilds the same events, which are all replays."""
    from .db.tables import Event

    learner = f"demo-{seed}-000000"
    first_id = str(uuid.uuid5(NAMESPACE, f"{seed}/{learner}/0"))
    with db.read() as session:
        first = session.scalar(
            select(Event.occurred_at).where(  # the learner: an index (ids alone are not, on PostgreSQL)
                Event.platform_id == platform_id, Event.learner == learner, Event.event_id == first_id
            )
        )
    if first is None:
        return None
    return first + dt.timedelta(days=random.Random(seed).uniform(0.05, 14))
