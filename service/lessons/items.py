"""A lesson's items: questions with known answers, asked before the workbench (`pre`), after it
(`post`) or both, and scored by the server. Written in the lesson's front matter under `items:`;
validated when the lessons load (a bad item stops start-up, naming the file and line)."""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from typing import Any

PHASES = ("pre", "post")
ITEM_PHASES = ("pre", "post", "both")
KINDS = ("choice", "number")
MAX_NUMBER = 1e9  # a number response beyond this is refused, not scored
_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,31}$")


class ItemError(ValueError):
    """What is wrong with one item (the loader adds the file and line)."""


@dataclass(frozen=True)
class Choice:
    id: str
    text: str
    misconception: str | None = None  # what choosing it reveals (None: the answer, or no known cause)


@dataclass(frozen=True)
class Item:
    id: str
    phase: str  # "pre" | "post" | "both"
    kind: str  # "choice" | "number"
    prompt: str
    choices: tuple[Choice, ...] = ()
    answer: str | None = None  # choice items: the right choice's id
    value: float | None = None  # number items: the right value
    tolerance: float = 0.0  # number items: how far a response may be from it
    working: str | None = None  # number items: how the answer is worked out, shown with it

    def asked_in(self, phase: str) -> bool:
        return self.phase in (phase, "both")

    def asked_again(self, phase: str) -> bool:
        """Whether an answer in `phase` is asked again later (its score then waits for that one)."""
        return phase == "pre" and self.phase == "both"

    def problem(self, response: Any) -> str | None:
        """Why `response` cannot be scored, or None."""
        if self.kind == "choice":
            ids = [c.id for c in self.choices]
            return None if response in ids else f"is one of this item's choices: {', '.join(ids)}"
        if isinstance(response, bool) or not isinstance(response, int | float):
            return "is a number"
        if not math.isfinite(response) or abs(response) > MAX_NUMBER:
            return f"is a finite number of at most {MAX_NUMBER:g} in size"
        return None

    def score(self, response: Any) -> tuple[bool, str | None]:
        """(correct, the misconception the response reveals) for a response `problem` accepts."""
        if self.kind == "number":
            assert self.value is not None
            return abs(float(response) - self.value) <= self.tolerance + 1e-9 * max(1.0, abs(self.value)), None
        chosen = next(c for c in self.choices if c.id == response)
        return chosen.id == self.answer, chosen.misconception

    def key(self) -> Any:
        """The right answer as a response: a choice id, or {value, tolerance}."""
        return self.answer if self.kind == "choice" else {"value": self.value, "tolerance": self.tolerance}

    def choice(self, choice_id: str) -> Choice | None:
        return next((c for c in self.choices if c.id == choice_id), None)

    def public_json(self) -> dict[str, Any]:
        """What a learner may see before answering: no answer, no misconceptions."""
        body: dict[str, Any] = {"id": self.id, "phase": self.phase, "kind": self.kind, "prompt": self.prompt}
        if self.kind == "choice":
            body["choices"] = [{"id": c.id, "text": c.text} for c in self.shown_choices()]
        return body

    def shown_choices(self) -> tuple[Choice, ...]:
        """The choices in the order a learner sees them: fixed per item (every learner and language
        alike), not the authored one, which puts the answer first."""
        return tuple(sorted(self.choices, key=lambda c: hashlib.sha256(f"{self.id}/{c.id}".encode()).digest()))

    def structure(self) -> tuple:
        """What a translation keeps: ids, phase, kind, the choices' ids and which carry a
        misconception, the key, whether a working is shown with it."""
        return (
            self.id,
            self.phase,
            self.kind,
            tuple((c.id, c.misconception is None) for c in self.choices),
            self.key(),
            self.working is None,
        )


def parse_items(raw: Any) -> tuple[Item, ...]:
    """The front matter's `items:` (absent: none); ItemError names the item and what is wrong."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ItemError("items is a list")
    items: list[Item] = []
    for entry in raw:
        item = _item(entry)
        if any(i.id == item.id for i in items):
            raise ItemError(f"item id {item.id!r} appears twice")
        items.append(item)
    return tuple(items)


def _text(entry: dict, key: str, where: str) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ItemError(f"{where} needs {key!r}, a non-empty string")
    return value.strip()


def _item(entry: Any) -> Item:
    if not isinstance(entry, dict) or not isinstance(entry.get("id"), str) or not _ID.match(entry["id"]):
        raise ItemError(f"an item needs an id of lowercase-with-dashes, at most 32 characters: {entry!r}")
    where = f"item {entry['id']!r}"
    if entry.get("phase") not in ITEM_PHASES:
        raise ItemError(f"{where}: phase is one of {', '.join(ITEM_PHASES)}")
    if entry.get("kind") not in KINDS:
        raise ItemError(f"{where}: kind is one of {', '.join(KINDS)}")
    own = "choices" if entry["kind"] == "choice" else "working"  # a number item says how it is worked out
    unknown = set(entry) - {"id", "phase", "kind", "prompt", "answer", own}
    if unknown:
        raise ItemError(f"{where}: a {entry['kind']} item has no {', '.join(sorted(unknown))}")
    common = {key: entry[key] for key in ("id", "phase", "kind")} | {"prompt": _text(entry, "prompt", where)}
    if entry["kind"] == "number":
        return _number_item(entry, where, common)
    choices = _choices(entry.get("choices"), where)
    answer = entry.get("answer")
    if answer not in [c.id for c in choices]:
        raise ItemError(f"{where}: answer {answer!r} is not one of its choices")
    if next(c for c in choices if c.id == answer).misconception is not None:
        raise ItemError(f"{where}: the answer's choice names a misconception")
    return Item(**common, choices=choices, answer=answer)


def _number_item(entry: dict, where: str, common: dict[str, Any]) -> Item:
    answer: Any = entry.get("answer")
    numbers = isinstance(answer, dict) and all(
        isinstance(answer.get(k), int | float) and not isinstance(answer.get(k), bool) for k in ("value", "tolerance")
    )
    if not numbers or set(answer) != {"value", "tolerance"} or not 0 <= answer["tolerance"] < MAX_NUMBER:
        raise ItemError(f"{where}: a number item's answer is {{value, tolerance}}, two numbers, tolerance >= 0")
    if abs(answer["value"]) > MAX_NUMBER:
        raise ItemError(f"{where}: the answer's value is at most {MAX_NUMBER:g} in size")
    working = _text(entry, "working", where) if "working" in entry else None
    return Item(**common, value=float(answer["value"]), tolerance=float(answer["tolerance"]), working=working)


def _choices(raw: Any, where: str) -> tuple[Choice, ...]:
    if not isinstance(raw, list) or len(raw) < 2:
        raise ItemError(f"{where}: a choice item has at least two choices")
    choices: list[Choice] = []
    for c in raw:
        if not isinstance(c, dict) or not isinstance(c.get("id"), str) or not _ID.match(c["id"]):
            raise ItemError(f"{where}: a choice needs an id of lowercase-with-dashes: {c!r}")
        if set(c) - {"id", "text", "misconception"}:
            raise ItemError(
                f"{where}: choice {c['id']!r} has unknown keys {sorted(set(c) - {'id', 'text', 'misconception'})}"
            )
        if any(other.id == c["id"] for other in choices):
            raise ItemError(f"{where}: choice id {c['id']!r} appears twice")
        misconception = c.get("misconception")
        if misconception is not None and (not isinstance(misconception, str) or not misconception.strip()):
            raise ItemError(f"{where}: choice {c['id']!r}'s misconception is a non-empty string")
        choices.append(Choice(c["id"], _text(c, "text", f"{where}, choice {c['id']!r},"), misconception))
    return tuple(choices)
