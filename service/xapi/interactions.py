"""Answered events as xAPI statements about cmi.interaction activities: the item is the activity
(`<base>/lessons/<lesson>/items/<item>`), its definition says what was asked (the prompt and the
choices as language maps, in every language the lesson is written in) and which response is
right; the result says what the learner answered and whether the server scored it correct."""

from __future__ import annotations

from typing import Any

from ..lessons import Lesson
from ..lessons.items import Item

INTERACTION = "http://adlnet.gov/expapi/activities/cmi.interaction"


def item_activity_id(base: str, lesson: str, item: str) -> str:
    return f"{base.rstrip('/')}/lessons/{lesson}/items/{item}"


def _words(lesson: Lesson, pick) -> dict[str, str]:
    """A language map of one text of the item in every language the lesson is written in."""
    found = {}
    for written in (lesson, *lesson.translations.values()):
        text = pick(written)
        if text:
            found["en-US" if written.locale == "en" else written.locale] = text
    return found


def _number(value: float) -> str:
    return f"{value:g}"


def _choice_words(lesson: Lesson, item: Item, choice_id: str) -> dict[str, str]:
    def text(written: Lesson) -> str:
        said = (written.item(item.id) or item).choice(choice_id) or item.choice(choice_id)
        return said.text if said else choice_id

    return _words(lesson, text)


def definition(lesson: Lesson, item: Item) -> dict[str, Any]:
    """The item as a cmi.interaction activity definition."""
    body: dict[str, Any] = {
        "name": _words(lesson, lambda w: (w.item(item.id) or item).prompt),
        "type": INTERACTION,
    }
    if item.kind == "choice":
        body["interactionType"] = "choice"
        body["correctResponsesPattern"] = [item.answer]
        body["choices"] = [{"id": c.id, "description": _choice_words(lesson, item, c.id)} for c in item.choices]
    else:
        assert item.value is not None
        low, high = item.value - item.tolerance, item.value + item.tolerance
        body["interactionType"] = "numeric"
        # xAPI's numeric pattern: a value, or a range "min[:]max"
        body["correctResponsesPattern"] = [_number(item.value) if low == high else f"{_number(low)}[:]{_number(high)}"]
    return body


def answered_object(lesson: Lesson | None, row: Any, base: str) -> dict[str, Any]:
    item = lesson.item(row.item) if lesson else None
    body: dict[str, Any] = {"objectType": "Activity", "id": item_activity_id(base, row.lesson, row.item)}
    if lesson is not None and item is not None:
        body["definition"] = definition(lesson, item)
    else:
        body["definition"] = {"name": {"en-US": row.item}, "type": INTERACTION}
    return body


def answered_result(data: dict[str, Any], extension: str) -> dict[str, Any]:
    """What was answered (a choice id, or a number as text), whether it was right, and in which
    phase; the misconception a wrong choice reveals."""
    response = data.get("response")
    result: dict[str, Any] = {
        "response": response if isinstance(response, str) else _number(float(response)) if response is not None else "",
        "success": bool(data.get("correct")),
        "completion": True,
        "extensions": {extension + "phase": data.get("phase")},
    }
    if data.get("misconception"):
        result["extensions"][extension + "misconception"] = data["misconception"]
    return result
