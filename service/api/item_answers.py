"""Answers to a lesson's items, as events: what an answer (or a skip) must say to fit its item, the
score the server adds, and the order rule (before the workbench, then after) judged over a batch and
what is stored."""

from __future__ import annotations

from typing import Any

from ..db.events import NewEvent
from ..db.progress import first_item_events
from ..edge.problems import Problem
from ..lessons import Lesson
from ..lessons.items import PHASES
from ..text import N_

ITEM_EVENTS = ("answered", "skipped")  # events about one item: an answer, or a question passed over


def answer_problem(lesson: Lesson, e: dict[str, Any]) -> tuple[str, str] | None:
    """(field, message) when an answered (or skipped) event does not fit its item: it names an item
    of the lesson and no checkpoint; data is exactly {response, phase}, a phase the item is asked in
    (a skip: exactly {phase: "pre"}, a question before the workbench passed over)."""
    if e["event"] not in ITEM_EVENTS:
        return "item", f"only answered and skipped events name an item, not {e['event']!r} events"
    if e["checkpoint"] is not None:
        return "checkpoint", f"an {e['event']} event names its item, not a checkpoint"
    if e.get("item") is None:
        return "item", f"an {e['event']} event names the item it is about"
    item = lesson.item(e["item"])
    if item is None:
        known = ", ".join(i.id for i in lesson.items) or "none"
        return "item", f"lesson {lesson.id!r} has no item {e['item']!r}; its items are: {known}"
    data = e["data"]
    if e["event"] == "skipped":
        if data != {"phase": "pre"} or not item.asked_in("pre"):
            return "data", 'a skip passes over a question before the workbench: data is exactly {"phase": "pre"}'
        return None
    if set(data) != {"response", "phase"}:
        return "data", 'an answer\'s data is exactly {"response": ..., "phase": "pre" or "post"}'
    if data["phase"] not in PHASES or not item.asked_in(data["phase"]):
        asked = [p for p in PHASES if item.asked_in(p)]
        return "data", f"data.phase {data['phase']!r}: item {item.id!r} is asked in {' and '.join(asked)}"
    if problem := item.problem(data["response"]):
        return "data", f"data.response {problem}"
    return None


def scored(lesson: Lesson | None, e: dict[str, Any]) -> dict[str, Any]:
    """An event's data as stored: an answer gains the server's score (`correct`, `misconception`)."""
    item = lesson.item(e["item"]) if lesson is not None and e.get("item") else None
    if item is None or e["event"] != "answered":
        return e["data"]
    correct, misconception = item.score(e["data"]["response"])
    return {**e["data"], "correct": correct, "misconception": misconception}


def in_order(db: Any, platform_id: int, events: list[NewEvent], lessons: dict[str, Lesson]) -> None:
    """Before, then after: an answer after the workbench to a question asked in both phases needs
    the learner's answer (or skip) before it, no later; and once answered after, the before answer
    stands (a 409 naming the rule). A batch is judged whole, in occurred_at order, with what is stored."""
    twice = [(i, e, (e.learner, e.lesson, e.item)) for i, e in enumerate(events) if e.item and _asked_twice(lessons, e)]
    if not twice:
        return
    with db.read() as session:
        first = first_item_events(session, platform_id, sorted({key for _, _, key in twice}))
    for _, e, key in sorted(twice, key=lambda t: t[1].occurred_at):
        first.setdefault((*key, e.data["phase"]), e.occurred_at)
    out_of_order = {}
    for i, e, key in twice:
        before, after = first.get((*key, "pre")), first.get((*key, "post"))
        if e.data["phase"] == "post" and (before is None or before > e.occurred_at):
            out_of_order[f"events.{i}"] = [
                f"item {e.item!r}: no answer (or skip) before the workbench precedes this one"
            ]
        elif e.data["phase"] == "pre" and after is not None and after < e.occurred_at:
            out_of_order[f"events.{i}"] = [
                f"item {e.item!r}: answered after the workbench already, at {after.isoformat()}"
            ]
    if out_of_order:
        raise Problem(
            409,
            N_(
                "an answer after the workbench follows the learner's answer (or skip) before it, and a "
                "before answer comes before the after one; nothing in this request was stored"
            ),
            slug="answer-order",
            errors=out_of_order,
        )


def _asked_twice(lessons: dict[str, Lesson], e: NewEvent) -> bool:
    lesson = lessons.get(e.lesson)
    item = lesson.item(e.item) if lesson and e.item else None
    return item is not None and item.phase == "both"
