"""The lesson in the learner's language, through each way of choosing it (an LTI launch's
`launch_presentation.locale`, the language menu, the browser's Accept-Language), with a checkpoint
done and no English interface string left; and every page in the pseudo-locale (accented, about
35 % longer) at phone and desktop size, with nothing scrolling sideways and no text on text."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from axe_playwright_python.sync_playwright import Axe

from service.i18n import babel_name
from service.i18n_catalogs import PLACEHOLDER, TEMPLATE, forms, po_path, read

from .conftest import demo_cohort, embedded_workbench, open_page, wait_for_checkpoint, wait_until, watched_page
from .test_layout import SIZES, overflow
from .test_lti import course_and_tool, lesson_frame

ROOT = Path(__file__).resolve().parents[2]
LESSON = "/lessons/multi-head-attention"
PAGES = [
    "/",
    LESSON,
    "/explorables/multi-head-attention",
    "/figures/four-heads",
    "/explorables/trained-heads",
    "/explorables/kv-cache",
    "/explorables/online-softmax",
    "/lessons/online-softmax",
    "/lessons/long-context",
    "/dashboard",
]
# What each locale calls the prediction form's parts (its catalog's words, written out here).
PREDICT = {"es": ("Tu predicción", "Guardar la predicción"), "zh-CN": ("你的预测", "保存预测")}
# Names, symbols and identifiers that are the same in every language.
NAMES = {
    "api",
    "rope",
    "softmax",
    "numpy",
    "pytest",
    "vitest",
    "python",
    "typescript",
    "node",
    "pnpm",
    "readme",
    "json",
    "minilm",
    "wordpiece",
    "gpt",
    "neox",
    "llama",
    "roformer",
    "utc",
    "cls",
    "sep",
    "nan",
    "csv",
    "ndjson",
    "inf",
    "max",
    "exp",
    "sqrt",
    "d_head",
    "d_model",
    "bytes",
    "byte",
}

# Every visible text of a document and its frames' (aria-label, title and placeholder included),
# except code, shapes, the learner's own words and what is marked as another language.
TEXTS = """() => {
  const page = document.documentElement.lang, out = [];
  const skip = (el) => !el || el.closest("code, pre, kbd, samp, script, style, textarea, .shape, svg text")
    || (el.closest("[lang]") && el.closest("[lang]").lang !== page);
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const el = node.parentElement;
    if (node.textContent.trim() && !skip(el) && el.checkVisibility({ visibilityProperty: true })) {
      out.push(node.textContent.trim());
    }
  }
  for (const el of document.querySelectorAll("[aria-label], [title], [placeholder]")) {
    if (skip(el)) continue;
    for (const name of ["aria-label", "title", "placeholder"]) {
      if (el.getAttribute(name)) out.push(el.getAttribute(name));
    }
  }
  return out;
}"""

# Text drawn on other text: the line boxes of every visible text node, compared pairwise; and
# text cut off by a box that hides its overflow.
TEXT_ON_TEXT = """() => {
  const boxes = [], clipped = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const el = node.parentElement;
    if (!node.textContent.trim() || !el || el.closest(".visually-hidden, .skip, option, script, style")) continue;
    if (!el.checkVisibility({ visibilityProperty: true })) continue; // display: none, a closed <details>
    const own = el.getBoundingClientRect();
    if (own.width <= 1 || own.height <= 1) continue; // visually hidden (a 1 px clipped box): read aloud, not drawn
    const range = document.createRange();
    range.selectNodeContents(node);
    for (const r of range.getClientRects()) {
      if (r.width < 1 || r.height < 1) continue;
      boxes.push({ r, node, text: node.textContent.trim().slice(0, 40) });
      for (let box = el; box && box !== document.body; box = box.parentElement) {
        const style = getComputedStyle(box);
        if (!["hidden", "clip"].includes(style.overflowX) && !["hidden", "clip"].includes(style.overflowY)) continue;
        const b = box.getBoundingClientRect();
        if (r.right > b.right + 2 || r.bottom > b.bottom + 2) clipped.push(node.textContent.trim().slice(0, 40));
        break;
      }
    }
  }
  const overlaps = [];
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
    const a = boxes[i], b = boxes[j];
    if (a.node === b.node) continue;
    const x = Math.min(a.r.right, b.r.right) - Math.max(a.r.left, b.r.left);
    const y = Math.min(a.r.bottom, b.r.bottom) - Math.max(a.r.top, b.r.top);
    if (x > 2 && y > 2) overlaps.push([a.text, b.text]);
  }
  return { overlaps: overlaps.slice(0, 10), clipped: clipped.slice(0, 10) };
}"""


def english_words(locale: str) -> set[str]:
    """Words of the English interface that the locale's catalog and lesson never use: any of
    them on the page is English left untranslated."""
    words = lambda text: {w.lower() for w in re.findall(r"[A-Za-z]{3,}", PLACEHOLDER.sub(" ", text))}  # noqa: E731
    english = set().union(*(words(t) for m in read(TEMPLATE) if m.id for t in forms(m.id)))
    # message by message: a "<" in one (i - W < j) must not open a tag that swallows the next ones
    theirs = set().union(*(words(t) for m in read(po_path(locale), babel_name(locale)) for t in forms(m.string)))
    theirs |= words((ROOT / "content" / "lessons" / locale / "multi-head-attention.md").read_text())
    return english - theirs - NAMES


def english_left(target, locale: str) -> list[str]:
    words = english_words(locale)
    texts = [text for frame in getattr(target, "frames", [target]) for text in frame.evaluate(TEXTS)]
    return sorted({t for t in texts if {w.lower() for w in re.findall(r"[A-Za-z]{3,}", t)} & words})


def predict_and_check(target, locale: str) -> None:
    """Record a prediction through the translated form and wait for the server to count it."""
    label, button = PREDICT[locale]
    target.get_by_label(label, exact=True).fill("Cada cabeza tiene 2 de ancho · 每个头宽 2。")
    target.get_by_role("button", name=button).click()
    wait_for_checkpoint(target, "predict")
    wait_until(target, "!!document.querySelector('.done-note:not([hidden])')")


def serious(page) -> list[str]:
    return [v["id"] for v in Axe().run(page).response["violations"] if v["impact"] in ("serious", "critical")]


def workbench_drawn(page) -> None:
    embedded_workbench(page)
    assert page.frame("workbench").evaluate("document.documentElement.lang") == page.evaluate(
        "document.documentElement.lang"
    )


@pytest.mark.parametrize("locale", ["es", "zh-CN"])
def test_accept_language_opens_the_lesson_translated_end_to_end(browser, live, locale):
    context = browser.new_context(locale=locale, viewport={"width": 1280, "height": 900})
    page = watched_page(context)
    open_page(page, live, LESSON)
    assert page.locator("html").get_attribute("lang") == locale
    workbench_drawn(page)
    predict_and_check(page, locale)
    assert english_left(page, locale) == []
    assert serious(page) == [] and page.errors == []
    context.close()


@pytest.mark.parametrize("locale", ["es", "zh-CN"])
def test_the_language_menu_translates_the_lesson_and_the_choice_is_kept(page, live, locale):
    open_page(page, live, LESSON)
    assert page.locator("html").get_attribute("lang") == "en"
    page.get_by_label("Language").select_option(locale)
    page.wait_for_url(f"**lang={locale}")
    page.wait_for_selector("main[aria-busy=false]")
    open_page(page, live, LESSON)  # the next visit, without ?lang=: the cookie
    assert page.locator("html").get_attribute("lang") == locale and page.locator("#lang").input_value() == locale
    workbench_drawn(page)
    predict_and_check(page, locale)
    assert english_left(page, locale) == []
    assert serious(page) == []


@pytest.mark.parametrize("locale", ["es", "zh-CN"])
def test_an_lti_launch_in_the_learners_locale_opens_the_lesson_translated(browser, tmp_path, locale):
    with course_and_tool(tmp_path) as (lms, tool, _url):
        lms.locale = {"es": "es-419", "zh-CN": "zh-Hans-CN"}[locale]  # as platforms send them
        context = browser.new_context(locale="en-US", viewport={"width": 1280, "height": 1000})  # the claim wins
        page = watched_page(context)
        page.goto(lms.url + "/course")
        frame = lesson_frame(page)
        assert frame.evaluate("document.documentElement.lang") == locale
        predict_and_check(frame, locale)
        assert english_left(frame, locale) == []
        again = watched_page(context)  # the same lesson, top level, in the language the launch kept
        open_page(again, tool, LESSON)
        assert again.locator("html").get_attribute("lang") == locale and serious(again) == []
        context.close()


@pytest.fixture(scope="module")
def analytics_key(live):
    (token,) = demo_cohort(live, 60, 7, "pseudo-school")
    return token


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("path", PAGES)
def test_every_page_in_the_pseudo_locale_fits_without_sideways_scroll_or_text_on_text(
    page, live, analytics_key, path, size
):
    width, height = SIZES[size]
    page.set_viewport_size({"width": width, "height": height})
    open_page(page, live, path + "?lang=en-XA")
    assert page.locator("html").get_attribute("lang") == "en-XA"
    assert page.locator("body").inner_text().count("⟦") > 5  # the pseudo-locale's words, not English
    if path == "/dashboard":
        page.locator("#api-key").fill(analytics_key)
        page.locator("#key-form button[type=submit]").click()
        page.locator("#mistakes table").wait_for(state="attached")
    if path == "/explorables/multi-head-attention":
        page.locator("#open-all").click()  # every stage's numbers and captions
        wait_until(page, "document.querySelectorAll('.stage.open').length > 6")
    drawn = {"/figures/four-heads": "figure.head-figure", "/explorables/trained-heads": "figure.th-head"}
    if path in drawn:  # the page's figures came, not a "could not" line
        assert page.locator(drawn[path]).count() >= 4, page.locator("#status").inner_text()
    if path == LESSON:
        embedded_workbench(page)  # loaded as the learner nears it: the frame exists from then
    frames = [page] + ([page.frame("workbench")] if path == LESSON else [])
    for target in frames:
        assert overflow(target) == 0, f"{path} scrolls sideways by {overflow(target)} px at {width} px"
        found = target.evaluate(TEXT_ON_TEXT)
        assert found == {"overlaps": [], "clipped": []}, (path, size, found)
