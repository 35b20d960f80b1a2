"""A new learner answers the questions before the workbench, predicts which head moves, does the
workbench, answers the questions after it and sees the server's feedback: the answer and the
misconception after, never before; at both sizes and in all three languages. The dashboard shows
the cohort's items view."""

import re

import pytest
from playwright.sync_api import expect

from service.lessons import load_catalog

from .conftest import (
    PATIENCE,
    VIEWPORTS,
    demo_cohort,
    embedded_workbench,
    open_page,
    wait_for_checkpoint,
    wait_until,
    watched_page,
)

LESSON = "/lessons/multi-head-attention"
CATALOG = load_catalog("content/lessons")["multi-head-attention"]
# Each locale's words for what the learner clicks and reads (its catalog's, written out here).
WORDS = {
    "en": {
        "record": "Record answer",
        "later": "comes back after the workbench",
        "wrong": "Not quite.",
        "right": "Correct.",
        "predict": ("Your prediction", "Record prediction"),
        "head-2": "Head 2",
        "held": "Your prediction held",
        "gain": "On the questions asked twice",
    },
    "es": {
        "record": "Registrar respuesta",
        "later": "vuelve después del banco de trabajo",
        "wrong": "No exactamente.",
        "right": "Correcto.",
        "predict": ("Tu predicción", "Guardar la predicción"),
        "head-2": "Cabeza 2",
        "held": "Tu predicción se cumplió",
        "gain": "En las preguntas hechas dos veces",
    },
    "zh-CN": {
        "record": "记录答案",
        "later": "会再问这个问题",
        "wrong": "不太对。",
        "right": "正确。",
        "predict": ("你的预测", "保存预测"),
        "head-2": "头 2",
        "held": "你的预测成立",
        "gain": "在问过两次的问题上",
    },
}


def manipulations_in_any_language(frame) -> None:
    """conftest's do_the_four_manipulations, found by id rather than by their (translated) labels."""
    frame.locator("#token-1-dim-3").fill("2")
    frame.locator("#token-2-dim-1").fill("-1")
    frame.locator("#causal").click()
    frame.locator("#reuse").click()


def answer_all(section, phase: str, locale: str, right: bool) -> None:
    """Answer every question of one block: the key's answer, or a wrong one (number 4, a wrong choice)."""
    lesson = CATALOG.in_locale(locale)
    asked = [i for i in lesson.items if i.asked_in(phase)]
    forms = section.locator("form.item-form")
    assert forms.count() == len(asked)
    for n, item in enumerate(asked):
        form = forms.nth(n)
        if item.kind == "number":
            form.locator("input").fill(str(int(item.value)) if right else "4")
        else:
            wanted = item.answer if right else next(c.id for c in item.choices if c.id != item.answer)
            form.locator(f"input[value='{wanted}']").check()
        form.get_by_role("button", name=WORDS[locale]["record"]).click()


# Both sizes in English, each other language at one of them: every language and every size walked.
WALKS = [("desktop", "en"), ("phone", "en"), ("phone", "es"), ("desktop", "zh-CN")]


@pytest.mark.parametrize("size, locale", WALKS)
def test_a_new_learner_answers_before_and_after_the_workbench_and_sees_feedback(browser, live, size, locale):
    context = browser.new_context(locale=locale, viewport=VIEWPORTS[size])
    page = watched_page(context)
    words = WORDS[locale]
    open_page(page, live, LESSON)
    pre, post = page.locator("section.directive-items").nth(0), page.locator("section.directive-items").nth(1)
    answer_all(pre, "pre", locale, right=False)
    feedback = pre.locator(".item-feedback")
    wait_until(
        page,
        "[...document.querySelectorAll('section.directive-items')[0].querySelectorAll('.item-feedback')]"
        ".every((p) => p.textContent && !p.classList.contains('queued'))",
    )
    # Before the workbench: recorded, neither scored nor answered for the learner.
    assert all(words["later"] in t for t in feedback.all_inner_texts())
    assert pre.locator(".item-feedback.wrong, .item-feedback.correct").count() == 0
    assert words["wrong"] not in pre.inner_text()
    # The prediction, with its choice, then the workbench: the engine judges it on the learner's edit.
    label, button = words["predict"]
    page.get_by_label(label, exact=True).fill("head 2 only")
    page.get_by_label(words["head-2"], exact=True).check()
    page.get_by_role("button", name=button).click()
    wait_for_checkpoint(page, "predict")
    manipulations_in_any_language(embedded_workbench(page))
    wait_for_checkpoint(page, "experiment")
    wait_until(page, "!!document.querySelector('.prediction-verdict:not([hidden])')")
    assert words["held"] in page.locator(".prediction-verdict").inner_text()
    # After: the post questions, half right; each gets its verdict, a wrong one the answer and its misconception.
    answer_all(post, "post", locale, right=True)
    wait_until(page, "document.querySelectorAll('.item-feedback.correct').length >= 9", timeout=20)
    after = post.locator(".item-feedback.correct")
    assert after.count() == 9 and all(words["right"] in t for t in after.all_inner_texts())
    # Now the pre answers are scored for the learner: wrong, with the misconception each shows.
    wait_until(page, "document.querySelectorAll('.item-feedback.wrong').length === 5")
    wrong = pre.locator(".item-feedback.wrong").all_inner_texts()
    misconceptions = [c.misconception for i in CATALOG.in_locale(locale).items for c in i.choices if c.misconception]
    assert all(words["wrong"] in t for t in wrong) and sum(any(m in t for m in misconceptions) for t in wrong) == 4
    # a wrong number shown with how its answer is reached (issue 65, C10)
    workings = [i.working for i in CATALOG.in_locale(locale).items if i.kind == "number" and i.asked_in("pre")]
    assert workings and all(sum(w in t for t in wrong) == 1 for w in workings)
    assert words["gain"] in post.locator(".item-gain").inner_text()
    # Kept after a reload: answers from the server, inputs locked.
    open_page(page, live, LESSON)
    wait_until(page, "document.querySelectorAll('.item-feedback.correct').length === 9")
    assert page.locator("form.item-form input:not([disabled])").count() == 0
    assert page.errors == []
    context.close()


@pytest.mark.parametrize("size", VIEWPORTS)
def test_the_dashboard_shows_each_questions_figures_and_the_gain(page, live, size):
    (token,) = demo_cohort(live, 150, 31, f"quiz-school-{size}")
    page.set_viewport_size(VIEWPORTS[size])
    open_page(page, live, "/dashboard")
    page.get_by_label("Analytics key (kept for this tab only)").fill(token)
    page.get_by_role("button", name="Show analytics").click()
    page.locator("#items").wait_for()
    rows = page.locator("#items details.item-stat")
    asked = sum(i.asked_in("pre") for i in CATALOG.items) + sum(i.asked_in("post") for i in CATALOG.items)
    assert rows.count() == asked
    gain = page.locator("#items-gain").inner_text()
    assert "normalized gain" in gain and "learners answered every question" in gain
    first = rows.nth(0)
    first.locator("summary").click()
    assert "discrimination" in first.inner_text() and "right" in first.inner_text()
    shapes = page.locator("#items details[data-item='head-shapes']")
    shapes.locator("summary").click()
    assert "Each head works on the whole model width" in shapes.inner_text()
    # each choice's bar is its share of the item's learners: none full, the right one the longest here
    track = shapes.locator(".choice-bar").first.bounding_box()["width"]
    widths = [bar.bounding_box()["width"] for bar in shapes.locator(".choice-bar > span").all()]
    assert 0 < max(widths) < track and widths[0] == max(widths)
    box = page.locator("#items").bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= VIEWPORTS[size]["width"] + 1  # nothing off the screen


@pytest.mark.parametrize("size", VIEWPORTS)
def test_the_after_questions_open_only_after_the_before_ones_and_the_experiment(browser, live, size):
    """Answered first, an after question would show its key to the same question before: closed,
    saying what they wait for, until the before questions are answered or skipped (a skip is
    recorded and shown) and the workbench's four manipulations are done."""
    context = browser.new_context(viewport=VIEWPORTS[size])
    page = watched_page(context)
    open_page(page, live, LESSON)
    pre, post = page.locator("section.directive-items").nth(0), page.locator("section.directive-items").nth(1)
    note = post.locator(".items-locked")
    assert "answer (or skip) the questions before the workbench" in note.inner_text()
    assert "four manipulations" in note.inner_text()
    assert post.locator("form.item-form[data-locked=true]").count() == post.locator("form.item-form").count()
    assert post.locator("fieldset:not([disabled])").count() == 0
    pre.get_by_role("button", name="Skip the questions I cannot answer yet").click()
    wait_until(
        page,
        "[...document.querySelectorAll('section.directive-items')[0].querySelectorAll('.item-feedback')]"
        ".every((p) => p.textContent.includes('Skipped'))",
    )
    assert "answer (or skip)" not in note.inner_text() and "four manipulations" in note.inner_text()
    assert pre.get_by_role("button", name="Skip the questions I cannot answer yet").is_hidden()
    manipulations_in_any_language(embedded_workbench(page))
    wait_for_checkpoint(page, "experiment")
    wait_until(page, "document.querySelectorAll('form.item-form[data-locked=true]').length === 0")
    assert note.is_hidden()
    answer_all(post, "post", "en", right=True)
    wait_until(page, "document.querySelectorAll('.item-feedback.correct').length === 9")
    # the skips are kept on the server: after a reload they still read as skipped
    open_page(page, live, LESSON)
    wait_until(page, "document.querySelectorAll('.item-feedback.correct').length === 9")
    assert all("Skipped" in t for t in pre.locator(".item-feedback").all_inner_texts())
    assert page.errors == []
    page.unroute_all(behavior="ignoreErrors")  # a read still held or fetched when the page goes
    context.close()


def until_asked(page, held: list, timeout_ms: int = 15000) -> None:
    """Until the page has asked for the learner's progress at least once more (a read held)."""
    for _ in range(timeout_ms // 50):
        if held:
            return
        page.wait_for_timeout(50)  # lets Playwright run the route handler
    raise AssertionError("the page never asked for the learner's progress")


def test_a_progress_read_that_left_before_a_skip_cannot_undo_it(browser, live):
    """Each delivery asks the server for the learner's progress, so reads overlap: one that left
    while the skip was still on this device, answered after the skip's own read, must not take the
    skip back (the skip button shown again, the questions unanswered)."""
    context = browser.new_context(viewport=VIEWPORTS["desktop"])
    page = watched_page(context)
    open_page(page, live, LESSON)
    held, let_through, answered = [], [], []  # held routes; reads let through; reads answered
    passing = {"on": False}
    lesson_read = lambda r: "/progress?lesson=" in r.url and r.frame == page.main_frame  # noqa: E731

    def hold(route):  # the lesson's own reads (the embedded workbench's checklist reads pass)
        if not lesson_read(route.request):
            route.continue_()
        elif passing["on"]:
            let_through.append(route.request)
            route.continue_()
        else:
            held.append(route)

    page.route(lambda url: "/progress?lesson=" in url, hold)
    page.on("requestfinished", lambda r: answered.append(r) if lesson_read(r) else None)
    embedded_workbench(page).locator("#causal").click()  # the workbench's event, delivered: a read asked
    until_asked(page, held)
    stale = [(route, route.fetch()) for route in held]  # what the server holds before the skip
    held.clear()
    pre = page.locator("section.directive-items").nth(0)
    skip = pre.get_by_role("button", name="Skip the questions I cannot answer yet")
    with page.expect_response(
        lambda r: (
            r.url.endswith("/api/v1/events") and r.request.method == "POST" and "skipped" in (r.request.post_data or "")
        )
    ):
        skip.click()
    until_asked(page, held)  # the skip's own read
    passing["on"] = True
    let_through.extend(route.request for route in held)
    for route in held:
        route.continue_()
    for _ in range(300):  # every later read answered before the older one comes back
        if len(answered) == len(let_through):
            break
        page.wait_for_timeout(50)
    assert len(answered) == len(let_through)
    passing["on"] = False  # reads from now on held: only the older one below is answered
    for route, response in stale:
        with page.expect_event("requestfinished", lesson_read):
            route.fulfill(response=response)
    page.wait_for_timeout(300)  # its body read and drawn, were it drawn
    assert skip.is_hidden()
    assert all("Skipped" in t for t in pre.locator(".item-feedback").all_inner_texts())
    assert page.errors == []
    page.unroute_all(behavior="ignoreErrors")  # a read still held or fetched when the page goes
    context.close()


def test_an_answer_erased_elsewhere_leaves_its_question_open_and_empty(browser, live):
    """The learner's answers erased elsewhere (a platform's erasure, a deletion notice): the next read
    of their progress has none, and each question is open again with no verdict left on it."""
    context = browser.new_context(viewport=VIEWPORTS["desktop"])
    page = watched_page(context)
    open_page(page, live, LESSON)
    pre = page.locator("section.directive-items").nth(0)
    answer_all(pre, "pre", "en", right=True)
    wait_until(
        page,
        "[...document.querySelectorAll('section.directive-items')[0].querySelectorAll('.item-feedback')]"
        ".every((p) => p.textContent.includes('Recorded'))",
    )
    erased = []

    def without_answers(route):  # the server's own answer, as it reads once the answers are gone
        response = route.fetch()
        body = response.json()
        for lesson in body["lessons"]:
            lesson["items"] = []
        erased.append(route.request)
        route.fulfill(response=response, json=body)

    page.route(lambda url: "/progress?lesson=" in url, without_answers)
    embedded_workbench(page).locator("#causal").click()  # the workbench's event, delivered: a read asked
    until_asked(page, erased)
    wait_until(
        page,
        "[...document.querySelectorAll('section.directive-items')[0].querySelectorAll('.item-feedback')]"
        ".every((p) => p.textContent === '')",
    )
    assert pre.locator(".item-feedback").all_inner_texts() == [""] * pre.locator("form.item-form").count()
    assert pre.locator("input:checked").count() == 0 and pre.locator("input:disabled").count() == 0
    assert all(
        v == "" for v in pre.locator("input[type=number]").evaluate_all("(inputs) => inputs.map((i) => i.value)")
    )
    assert pre.get_by_role("button", name="Record answer").first.is_visible()
    assert page.errors == []
    page.unroute_all(behavior="ignoreErrors")  # a read in flight when the page goes is not an error
    context.close()


def test_a_progress_read_the_server_sheds_is_asked_again_and_the_answer_shows_as_recorded(browser, live):
    """A read answered 503 (a busy server, a SQLite lock held past its timeout) is asked again a moment later:
    the answer the server holds reads as recorded, never as still waiting on this device."""
    context = browser.new_context(viewport=VIEWPORTS["desktop"])
    page = watched_page(context)
    open_page(page, live, LESSON)
    shedding, shed = {"on": True}, []

    def busy(route):  # the lesson's reads while shedding; the embedded workbench's checklist reads pass
        if shedding["on"] and route.request.frame == page.main_frame:
            shed.append(route.request)
            route.fulfill(status=503, content_type="application/problem+json", json={"title": "Busy", "status": 503})
        else:
            route.continue_()

    page.route(lambda url: "/progress?lesson=" in url, busy)
    item = next(i for i in CATALOG.in_locale("en").items if i.asked_in("pre"))
    form = page.locator("section.directive-items").nth(0).locator("form.item-form").first
    if item.kind == "number":
        form.locator("input").fill(str(int(item.value)))
    else:
        form.locator(f"input[value='{item.answer}']").check()
    form.get_by_role("button", name=WORDS["en"]["record"]).click()
    until_asked(page, shed)  # delivered, and the read it asked for shed
    page.wait_for_timeout(300)  # every read this delivery asked for is shed
    shedding["on"] = False
    feedback = form.locator(".item-feedback")
    expect(feedback).to_contain_text(WORDS["en"]["later"], timeout=10000 * PATIENCE)
    expect(feedback).not_to_have_class(re.compile(r"\bqueued\b"))
    assert len(shed) >= 1
    page.unroute_all(behavior="ignoreErrors")
    context.close()
