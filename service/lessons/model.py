"""A lesson as the loader leaves it: metadata, checkpoints with completion rules, parsed blocks."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .items import Item

COMPLETIONS = ("learner", "explorable-event")
REQUIREMENTS = ("text", "passing-tests")


CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")  # one word per character
DIGIT = re.compile(r"\d")  # a number written in any script's digits


@dataclass(frozen=True)
class Checkpoint:
    id: str
    title: str
    completion: str  # "learner" | "explorable-event"
    requires: str | None = None  # learner checkpoints: "text" | "passing-tests"
    instance_id: str | None = None  # explorable-event: which explorable
    event: str | None = None  # explorable-event: which event completes it
    # explorable-event: the manipulations (`data.manipulation` of its events) that must all be
    # done; none: the first matching event completes it.
    manipulations: tuple[str, ...] = ()
    prediction: str | None = None  # learner checkpoints: the engine check its choice is judged by (prediction.py)
    # text checkpoints that earn their completion: at least `min_words` words (a CJK character is one), half
    # of them different, and two of the lesson's `vocabulary` (language -> words; any language counts);
    # a prediction that `expects` a number holds one
    vocabulary: tuple[tuple[str, tuple[str, ...]], ...] = ()
    min_words: int = 0
    expects: str = ""  # "" | "number"

    def as_json(self) -> dict[str, Any]:
        rule: dict[str, Any] = {"completion": self.completion}
        if self.completion == "learner":
            rule["on"] = {"event": "completed", "checkpoint": self.id}
            rule["requires"] = self.requires
        else:
            rule["on"] = {"event": self.event, "instance_id": self.instance_id}
            if self.manipulations:
                rule["manipulations"] = list(self.manipulations)
        if self.prediction:
            rule["prediction"] = self.prediction
        if self.min_words or self.vocabulary:
            rule["min_words"], rule["vocabulary"] = self.min_words, {tag: list(ws) for tag, ws in self.vocabulary}
        if self.expects:
            rule["expects"] = self.expects
        return {"id": self.id, "title": self.title, **rule}

    def text_problem(self, text: str) -> str | None:
        """Why a text does not earn this checkpoint (no number where a number is asked, too short, one word
        repeated, fewer than two of the lesson's words), or None: views/checkpoint-panel.js judges alike."""
        if self.expects == "number" and not DIGIT.search(text):
            return "the question asks for a number: write the number you expect"
        tokens = CJK.sub(" ", text).casefold().split() + CJK.findall(text)
        if len(tokens) < self.min_words:
            return f"write at least {self.min_words} words about what you saw; this has {len(tokens)}"
        if len(set(tokens)) < (self.min_words + 1) // 2:
            distinct = (self.min_words + 1) // 2
            return f"use at least {distinct} different words; this has {len(set(tokens))}"
        lowered = text.casefold()
        every = [word for _, words in self.vocabulary for word in words]
        found = {word.casefold() for word in every if word.casefold() in lowered}
        if every and len(found) < min(2, len(every)):
            return f"use at least two of the lesson's words for what you saw, such as {', '.join(every[:4])}"
        return None

    def matches(self, event: str, checkpoint: str | None, instance_id: str | None) -> bool:
        """Whether an event counts towards this checkpoint under its rule."""
        if self.completion == "learner":
            return event == "completed" and checkpoint == self.id
        return event == self.event and instance_id == self.instance_id and checkpoint in (None, self.id)


@dataclass(frozen=True)
class Block:
    kind: str  # predict | answer | explorable | exercise | explain | self-check
    attrs: dict[str, str]
    markdown: str
    html: str
    line: int
    items: tuple[str, ...] = ()  # self-check questions
    answers: tuple[str | None, ...] = ()  # each question's model answer (a nested list item), if written

    def as_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": self.kind,
            **self.attrs,
            "line": self.line,
            "markdown": self.markdown,
            "html": self.html,
        }
        if self.items:
            body["questions"] = list(self.items)
            body["answers"] = list(self.answers)
        return body


@dataclass(frozen=True)
class Lesson:
    id: str
    title: str
    order: int
    summary: str
    objectives: tuple[str, ...]
    prerequisites: tuple[str, ...]  # lesson ids
    checkpoints: tuple[Checkpoint, ...]
    markdown: str
    html: str
    blocks: tuple[Block, ...]
    source: str
    extra: dict[str, Any] = field(default_factory=dict)
    prerequisite_titles: tuple[str, ...] = ()  # the catalog's title, else front matter `{id, title}`, else the id
    prerequisites_present: tuple[bool, ...] = ()  # whether each is a lesson of this catalog (a link)
    locale: str = "en"  # the language it is written in (content/lessons/<locale>/ holds translations)
    translations: dict[str, Lesson] = field(default_factory=dict)  # locale -> this lesson in it
    items: tuple[Item, ...] = ()  # questions with known answers (items.py), in the lesson's language

    def item(self, item_id: str) -> Item | None:
        return next((i for i in self.items if i.id == item_id), None)

    def in_locale(self, locale: str) -> Lesson:
        """This lesson in `locale` where it is translated, else as written (English)."""
        return self.translations.get(locale, self)

    def titles(self, checkpoint_id: str | None = None) -> dict[str, str]:
        """The lesson's (or one checkpoint's) title in every language it is written in, by locale."""
        found = {}
        for lesson in (self, *self.translations.values()):
            checkpoint = lesson.checkpoint(checkpoint_id) if checkpoint_id else None
            found[lesson.locale] = checkpoint.title if checkpoint else lesson.title
        return found

    def checkpoint(self, checkpoint_id: str) -> Checkpoint | None:
        return next((c for c in self.checkpoints if c.id == checkpoint_id), None)

    def completes(self, event: str, checkpoint: str | None, instance_id: str | None) -> Checkpoint | None:
        """The checkpoint one event completes by itself under the lesson's rules, if any (a
        checkpoint of several manipulations completes from their set: `advances`)."""
        cp = self.counts_towards(event, checkpoint, instance_id)
        return None if cp is None or cp.manipulations else cp

    def counts_towards(self, event: str, checkpoint: str | None, instance_id: str | None) -> Checkpoint | None:
        """The checkpoint whose rule this event matches, if any."""
        return next((cp for cp in self.checkpoints if cp.matches(event, checkpoint, instance_id)), None)

    def advances(
        self, event: str, checkpoint: str | None, instance_id: str | None, data: dict[str, Any]
    ) -> tuple[Checkpoint, str] | None:
        """(checkpoint, manipulation) when this event reports one of a checkpoint's manipulations."""
        cp = self.counts_towards(event, checkpoint, instance_id)
        done = data.get("manipulation") if cp is not None and cp.manipulations else None
        return (cp, done) if cp is not None and done in cp.manipulations else None

    def summary_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "locale": self.locale,
            "title": self.title,
            "order": self.order,
            "summary": self.summary,
            "objectives": list(self.objectives),
            "prerequisites": list(self.prerequisites),
            "prerequisite_titles": list(self.prerequisite_titles),
            "prerequisites_present": list(self.prerequisites_present),
            "checkpoints": [c.as_json() for c in self.checkpoints],
        }

    def as_json(self) -> dict[str, Any]:
        return {
            **self.summary_json(),
            "items": [i.public_json() for i in self.items],
            "markdown": self.markdown,
            "html": self.html,
            "blocks": [b.as_json() for b in self.blocks],
        }
