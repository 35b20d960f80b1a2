"""Each language set as it is written (issue 65, K6): Chinese with no space between its characters and its
own punctuation, in the lessons and in every line the explorables write; no page with two headings of one
name."""

from __future__ import annotations

import collections
import re

import pytest

from .test_layout import PAGES

# A space between two Chinese characters (or after full-width punctuation), Western punctuation after one.
CJK = "[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]"
MISSET = re.compile(rf"{CJK} +{CJK}|[\u3400-\u9fff][,;:](?= |[\u3400-\u9fff])|[\u3400-\u9fff]\. ")
HEADINGS = "() => [...document.querySelectorAll('h1, h2, h3')].map((h) => h.tagName + ' ' + h.textContent.trim())"
LESSONS = {name: path for name, path in PAGES.items() if path.startswith("/lessons/")}
CHINESE = {name: path for name, path in PAGES.items() if not path.startswith("/api/")}


def opened(page, live, path: str, locale: str):
    where, _, state = path.partition("#")
    page.goto(f"{live.url}{where}?lang={locale}" + (f"#{state}" if state else ""))
    page.wait_for_selector("main[aria-busy=false]")  # an embedded explorable is its own page, read as one


@pytest.mark.parametrize("name", sorted(CHINESE))
def test_chinese_is_set_without_spaces_between_characters(page, live, name):
    page.set_viewport_size({"width": 1280, "height": 800})
    opened(page, live, CHINESE[name], "zh-CN")
    text = page.evaluate("document.body.innerText")
    assert [text[max(0, m.start() - 20) : m.end() + 20] for m in MISSET.finditer(text)] == []


@pytest.mark.parametrize("locale", ["en", "es", "zh-CN"])
@pytest.mark.parametrize("name", sorted(LESSONS))
def test_no_lesson_has_two_headings_of_one_name(page, live, name, locale):
    page.set_viewport_size({"width": 1280, "height": 800})
    opened(page, live, LESSONS[name], locale)
    twice = [h for h, n in collections.Counter(page.evaluate(HEADINGS)).items() if n > 1]
    assert twice == []
