"""Item statistics from the rollups' sums (item_rollups.py): per item and phase the share of
learners whose latest answer is correct, the point-biserial discrimination (Pearson's r between
the item's 0/1 score and the learner's score on the phase's other items), each choice's count
with the misconception it reveals; and the cohort's gain, Hake's normalized gain of the mean
scores of the learners who answered every item of both phases. Groups under k are suppressed."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ...lessons import Lesson
from ...lessons.items import PHASES, Item
from ...text import N_
from .item_rollups import Sums

PLACES = 4


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, PLACES)


def pearson(n: int, sx: int, sy: int, sxy: int, syy: int) -> float | None:
    """r of x (0/1, so sum x^2 = sum x) and y from their sums; None when either does not vary."""
    spread = (n * sx - sx * sx) * (n * syy - sy * sy)
    return None if spread <= 0 else (n * sxy - sx * sy) / math.sqrt(spread)


def item_statistics(
    lesson: Lesson, sums: Sums, k: int, words: Lesson | None = None, say: Callable[[str], str] = str
) -> dict[str, Any]:
    """The items endpoint's body; `words`: the lesson in the reader's language (prompts, choices,
    misconceptions), `say` the reader's words for this module's own (the grouped number answers)."""
    words = words or lesson
    items = [
        _item_row(item, phase, sums, k, words.item(item.id) or item, say)
        for phase in PHASES
        for item in lesson.items
        if item.asked_in(phase)
    ]
    return {"lesson": lesson.id, "k": k, "items": items, "gain": _gain(lesson, sums, k)}


def _item_row(item: Item, phase: str, sums: Sums, k: int, words: Item, say: Callable[[str], str]) -> dict[str, Any]:
    n, sx, sy, sxy, syy = sums.get(("pair", f"{phase}/{item.id}"), [0, 0, 0, 0, 0])
    counts, right = _responses(sums, f"{phase}/{item.id}/")
    if item.kind == "number":  # a value fewer than k learners gave is never listed: right or wrong, together
        counts, right = _grouped(counts, right, k)
    shown = n >= k
    rate = shown and _safe_split(sx, n, k)  # the rate tells how many were right: both groups k or more, or none
    hidden = _suppressed(counts, right, k, rate) if shown else set()
    ids = [c.id for c in words.choices] or sorted(counts, key=lambda r: (-counts[r], r))
    choices = []
    for choice_id in ids:
        said = words.choice(choice_id)
        choices.append(
            {
                "id": choice_id,
                "text": said.text if said else say(OTHER[choice_id]) if choice_id in OTHER else as_typed(choice_id),
                "count": None if not shown or choice_id in hidden else counts.get(choice_id, 0),
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
        "correct_rate": _rounded(sx / n) if rate else None,
        "discrimination": _rounded(pearson(n, sx, sy, sxy, syy)) if rate else None,
        "suppressed": not shown,
        "choices": choices,
    }


def as_typed(response: str) -> str:
    """A number answer as a learner writes it: "2", not the stored "2.0" (Python's float text)."""
    try:
        value = float(response)
    except ValueError:
        return response
    return str(int(value)) if value.is_integer() and abs(value) < 2**53 else response


OTHER = {"other-right": N_("other right answers"), "other-wrong": N_("other wrong answers")}


def _responses(sums: Sums, prefix: str) -> tuple[dict[str, int], dict[str, bool]]:
    """Each response's count (its learners' latest answers) and whether it is right."""
    counts: dict[str, int] = {}
    right: dict[str, bool] = {}
    for (dimension, key), values in sums.items():
        if dimension == "choice" and key.startswith(prefix) and values[0]:
            response, _, score = key[len(prefix) :].rpartition("/")
            counts[response] = counts.get(response, 0) + values[0]
            right[response] = score == "1"
    return counts, right


def _grouped(counts: dict[str, int], right: dict[str, bool], k: int) -> tuple[dict[str, int], dict[str, bool]]:
    """Number answers: a value given by fewer than k learners joins the other right (or wrong) ones."""
    kept = {r: c for r, c in counts.items() if c >= k}
    flags = {r: right[r] for r in kept}
    for response, count in counts.items():
        if count < k:
            other = "other-right" if right[response] else "other-wrong"
            kept[other] = kept.get(other, 0) + count
            flags[other] = right[response]
    return kept, flags


def _safe_split(sx: int, n: int, k: int) -> bool:
    return sx in (0, n) or k <= sx <= n - k


def _suppressed(counts: dict[str, int], right: dict[str, bool], k: int, rate: bool) -> set[str]:
    """The counts not shown: those of 1 to k-1 learners, and enough others that none of them is
    the difference of shown figures (complementary suppression). The learners are shown, and with
    the rate the right and the wrong ones, so within each such total no count hides alone."""
    hidden = {r for r, c in counts.items() if 0 < c < k}
    groups = [{r for r in counts if right[r]}, {r for r in counts if not right[r]}] if rate else [set(counts)]
    for group in groups:
        while len(group & hidden) == 1:
            others = sorted((counts[r], r) for r in group - hidden if counts[r] > 0)
            if not others:
                break  # the total is itself shown as none: the one hidden count is not a learner of its group
            hidden.add(others[0][1])
    return hidden


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
