"""Items in a lesson's front matter: the seed's self-checks and the pre/post questions, scored by
their keys; a malformed item stops the lessons loading, naming the file, line and what is wrong."""

import re

import pytest

from service.lessons import LessonError, load_catalog, load_lessons
from service.lessons.items import PHASES

ITEMS_FRONT = """\
---
id: tiny
title: Tiny
order: 1
objectives: [one]
checkpoints:
  - id: predict
    title: Predict
    completion: learner
    requires: text
items:
{items}
---

:::items{{phase="pre"}}
Before.
:::

:::items{{phase="post"}}
After.
:::
"""

GOOD_ITEM = """\
  - id: width
    phase: both
    kind: choice
    prompt: How wide?
    choices:
      - {id: two, text: "2"}
      - {id: four, text: "4", misconception: Every head reads the whole width}
    answer: two"""


@pytest.fixture(scope="module")
def lesson():
    return load_catalog("content/lessons")["multi-head-attention"]


def test_the_seed_asks_its_four_self_checks_after_and_at_least_four_items_before_and_after(lesson):
    post_only = [i for i in lesson.items if i.phase == "post"]
    both = [i for i in lesson.items if i.phase == "both"]
    assert [i.id for i in post_only] == ["head-shapes", "why-head-2", "stable-order", "output-projection"]
    assert len(both) >= 4 and all(i.asked_in("pre") and i.asked_in("post") for i in both)
    assert "stable head order" in lesson.item("stable-order").prompt


def test_every_wrong_choice_names_the_misconception_it_reveals_and_the_answer_none(lesson):
    for item in (i for i in lesson.items if i.kind == "choice"):
        for choice in item.choices:
            assert (choice.misconception is None) == (choice.id == item.answer), (item.id, choice.id)


def test_scoring_a_choice_and_a_number(lesson):
    shapes = lesson.item("head-shapes")
    assert shapes.score("right") == (True, None)
    assert shapes.score("full-width") == (False, "Each head works on the whole model width")
    width = lesson.item("head-width")  # d_model 8 over 4 heads
    assert width.score(2) == (True, None) and width.score(2.0) == (True, None)
    assert width.score(8 / 3) == (False, None) and width.score(4) == (False, None)
    assert width.problem("2") == "is a number" and width.problem(True) == "is a number"
    assert shapes.problem("nope").startswith("is one of this item's choices: right, full-width")


def test_the_lesson_json_never_carries_an_answer_or_a_misconception(lesson):
    body = lesson.as_json()
    assert [i["id"] for i in body["items"]] == [i.id for i in lesson.items]
    text = str(body["items"])
    assert "answer" not in text and "misconception" not in text and "tolerance" not in text
    for item in lesson.items:  # no misconception text anywhere in the items shown before answering
        for choice in item.choices:
            assert choice.misconception is None or choice.misconception not in text


def test_translations_keep_the_items_keys_and_translate_their_words(lesson):
    for locale in ("es", "zh-CN"):
        translated = lesson.in_locale(locale)
        assert [i.structure() for i in translated.items] == [i.structure() for i in lesson.items]
        assert all(a.prompt != b.prompt for a, b in zip(translated.items, lesson.items, strict=True))


def test_every_number_item_shows_how_its_answer_is_reached_in_each_language():
    """Issue 65 (C10): a wrong number answer is shown with its working, which arrives at the answer itself
    (written as the language writes numbers: 1,875 in Spanish)."""
    catalog = load_catalog("content/lessons")
    numbers = [(lesson, item) for lesson in catalog.values() for item in lesson.items if item.kind == "number"]
    assert len(numbers) >= 8
    for lesson, item in numbers:
        for locale in ("en", "es", "zh-CN"):
            shown = lesson.in_locale(locale).item(item.id)
            written = f"{item.value:g}".replace(".", "," if locale == "es" else ".")
            assert shown.working and written in shown.working, (lesson.id, item.id, locale, shown.working)


@pytest.mark.parametrize(
    "items, message",
    [
        (GOOD_ITEM.replace("phase: both", "phase: during"), "item 'width': phase is one of pre, post, both"),
        (GOOD_ITEM.replace("kind: choice", "kind: essay"), "item 'width': kind is one of choice, number"),
        (GOOD_ITEM.replace("answer: two", "answer: three"), "item 'width': answer 'three' is not one of its choices"),
        (GOOD_ITEM.replace("answer: two", "answer: four"), "the answer's choice names a misconception"),
        (GOOD_ITEM.replace("id: four", "id: two"), "choice id 'two' appears twice"),
        (GOOD_ITEM + "\n" + GOOD_ITEM, "item id 'width' appears twice"),
        (GOOD_ITEM.replace("    prompt: How wide?\n", ""), "item 'width' needs 'prompt'"),
        (GOOD_ITEM.replace("id: width", "id: Width"), "an item needs an id of lowercase-with-dashes"),
        (
            "  - {id: n, phase: pre, kind: number, prompt: How many, answer: 2}",
            "a number item's answer is {value, tolerance}",
        ),
        (
            "  - {id: n, phase: pre, kind: number, prompt: How many, answer: {value: 2, tolerance: -1}}",
            "tolerance >= 0",
        ),
        ("  - {id: n, phase: post, kind: number, prompt: How many, answer: {value: 2, tolerance: 0}}", "asks no item"),
        (GOOD_ITEM + "\n    working: 2 of 4", "item 'width': a choice item has no working"),
        (
            "  - {id: n, phase: pre, kind: number, prompt: How many, answer: {value: 2, tolerance: 0}, working: ''}",
            "item 'n' needs 'working'",
        ),
    ],
)
def test_a_malformed_item_stops_loading_with_what_is_wrong(tmp_path, items, message):
    (tmp_path / "tiny.md").write_text(ITEMS_FRONT.format(items=items))
    with pytest.raises(LessonError, match=re.escape(message)) as caught:
        load_lessons(tmp_path)
    assert caught.value.path.endswith("tiny.md")


def test_an_item_asked_in_a_phase_needs_a_block_asking_it(tmp_path):
    text = ITEMS_FRONT.format(items=GOOD_ITEM)
    (tmp_path / "tiny.md").write_text(text.split(':::items{phase="post"}')[0])
    with pytest.raises(LessonError, match=r"item 'width' is asked post, but no :::items\{phase='post'\}"):
        load_lessons(tmp_path)
    assert set(PHASES) == {"pre", "post"}


def test_a_prediction_names_a_known_engine_check(tmp_path):
    text = ITEMS_FRONT.format(items=GOOD_ITEM).replace("requires: text", "requires: text\n    prediction: vibes")
    (tmp_path / "tiny.md").write_text(text)
    with pytest.raises(LessonError, match="prediction is one of"):
        load_lessons(tmp_path)
