"""Item statistics from the rollups' sums (item_rollups.py): per item and phase the share of
learners whose latest answer is correct, the point-biserial discrimination (Pearson's r between
the item's 0/1 score and the learner's score on the phase's other items), each choice's count
with the misconception it reveals; and the cohort's gain, Hake's normalized gain of the mean
scores of the learners who answered every item of both phases. Groups under k are suppressed."""

from __future__ import annotations

import math
from typing import Any

from ...lessons import Lesson
from ...lessons.items import PHASES, Item
from .item_rollups import Sums

PLACES = 4


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, PLACES)


def pearson(n: int, sx: int, sy: int, sxy: int, syy: int) -> float | None:
    """r of x (0/1, so sum x^2 = sum x) and y from their sums; None when either does not vary."""
    spread = (n * sx - sx * sx) * (n * syy - sy * sy)
    return None if spread <= 0 else (n * sxy - sx * sy) / math.sqrt(spread)


def item_statistics(lesson: Lesson, sums: Sums, k: int, words: Lesson | None = None) -> dict[str, Any]:
    """The items endpoint's body; `words`: the lesson in the reader's language (prompts, choices,
    misconceptions)."""
    words = words or lesson
    items = [
        _item_row(item, phase, sums, k, words.item(item.id) or item)
        for phase in PHASES
        for item in lesson.items
        if item.asked_in(phase)
    ]
    return {"lesson": lesson.id, "k": k, "items": items, "gain": _gain(lesson, sums, k)}


def _item_row(item: Item, phase: str, sums: Sums, k: int, words: Item) -> dict[str, Any]:
    n, sx, sy, sxy, syy = sums.get(("pair", f"{phase}/{item.id}"), [0, 0, 0, 0, 0])
    shown = n >= k
    counts: dict[str, int] = {}
    right: dict[str, bool] = {}
    prefix = f"{phase}/{item.id}/"
    for (dimension, key), values in sums.items():
        if dimension == "choice" and key.startswith(prefix):
            response, _, score = key[len(prefix) :].rpartition("/")
            counts[response] = counts.get(response, 0) + values[0]
            right[response] = score == "1"
    ids = [c.id for c in words.choices] or sorted(counts, key=lambda r: (-counts[r], r))
    choices = []
    for choice_id in ids:
        count = counts.get(choice_id, 0)
        said = words.choice(choice_id)
        choices.append(
            {
                "id": choice_id,
                "text": said.text if said else choice_id,
                "count": count if shown and (count == 0 or count >= k) else None,
                "correct": said.id == item.answer if said else right.get(choice_id, False),
                "misconception": said.misconception if said else None,
            }
        )
    return {
        "id": item.id,
        "phase": phase,
        "kind": item.kind,
        "prompt": words.prompt,
        "learners": n if shown else None,
        "correct_rate": _rounded(sx / n) if shown else None,
        "discrimination": _rounded(pearson(n, sx, sy, sxy, syy)) if shown else None,
        "suppressed": not shown,
        "choices": choices,
    }


def _gain(lesson: Lesson, sums: Sums, k: int) -> dict[str, Any]:
    pre = sum(i.asked_in("pre") for i in lesson.items)
    post = sum(i.asked_in("post") for i in lesson.items)
    learners, pre_correct, post_correct, *_ = sums.get(("gain", f"{pre}/{post}"), [0, 0, 0, 0, 0])
    if learners < k or not pre or not post:
        return {"learners": None, "pre_mean": None, "post_mean": None, "normalized_gain": None, "suppressed": True}
    pre_mean, post_mean = pre_correct / (learners * pre), post_correct / (learners * post)
    gain = None if pre_mean >= 1 else (post_mean - pre_mean) / (1 - pre_mean)
    return {
        "learners": learners,
        "pre_mean": _rounded(pre_mean),
        "post_mean": _rounded(post_mean),
        "normalized_gain": _rounded(gain),
        "suppressed": False,
    }
