"""A lesson launched as a cmi5 assignable unit by an LMS playing its part on loopback (tests/cmi5/lms.py):
the five parameters in a shuffled order, one token fetch, the launch data and the learner's
preferences read before the first statement, the lesson finished and the learner back at the
LMS's return URL, every statement in the LMS's store once and in the cmi5 order; at both sizes."""

from __future__ import annotations

import time
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest

from service.lessons import load_catalog

from ..cmi5.lms import SESSION_ID, Cmi5Lms
from .conftest import PATIENCE, VIEWPORTS, embedded_workbench, wait_for_checkpoint, wait_until
from .test_inside_the_model_page import EXPLANATIONS
from .test_layout import overflow

LESSON = "inside-the-model"
ITEMS = load_catalog("content/lessons")[LESSON].items
CMI5 = "https://w3id.org/xapi/cmi5/context/categories/cmi5"
MOVEON = "https://w3id.org/xapi/cmi5/context/categories/moveon"


@pytest.fixture(scope="module")
def lms():
    lms = Cmi5Lms()
    yield lms
    lms.stop()


def wait_for(condition, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout * PATIENCE
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def opened(page, url: str):
    page.goto(url)
    page.wait_for_selector("main[aria-busy=false]")
    return page


def categories(statement) -> set[str]:
    return {c["id"] for c in statement["context"].get("contextActivities", {}).get("category", [])}


def answer(page, phase: str) -> None:
    """Every question of one block, each right; until the server has scored or recorded them all."""
    section = page.locator("section.directive-items").nth(0 if phase == "pre" else 1)
    asked = [i for i in ITEMS if i.asked_in(phase)]
    for n, item in enumerate(asked):
        form = section.locator("form.item-form").nth(n)
        if item.kind == "number":
            form.locator("input").fill(str(int(item.value)))
        else:
            form.locator(f"input[value='{item.answer}']").check()
        form.locator("button[type=submit]").click()
    block = f"document.querySelectorAll('section.directive-items')[{0 if phase == 'pre' else 1}]"
    feedback = f"[...{block}.querySelectorAll('.item-feedback')]"
    said = f"{feedback}.filter((p) => p.textContent && !p.classList.contains('queued'))"
    wait_until(page, f"{said}.length === {len(asked)}")


def finish_the_lesson(page) -> None:
    """The questions before, the prediction, the explorable's manipulations, the questions after it (each
    right), then the explanation."""
    answer(page, "pre")
    page.locator("#prediction").fill("Layer 2's induction heads at the last position.")
    page.locator("#prediction").locator("xpath=ancestor::form").locator("button[type=submit]").click()
    wait_for_checkpoint(page, "predict")
    frame = embedded_workbench(page)
    frame.locator("#corrupted").fill("q8Lm3Xk7q8Lm3")
    frame.locator("#texts button[type=submit]").click()
    frame.locator("[data-stage=effect] td[data-cell='1.1.12'] button").click()
    frame.locator("#read").select_option("1.1")
    frame.locator("#pitfall").select_option("gradient_through_frozen_softmax")
    wait_for_checkpoint(page, "experiment")
    answer(page, "post")
    page.locator("#explanation").fill(EXPLANATIONS["en"])
    page.locator("#explanation").locator("xpath=ancestor::form").locator("button[type=submit]").click()
    wait_for_checkpoint(page, "explain")


@pytest.mark.parametrize("size", VIEWPORTS)
def test_an_lms_launches_the_lesson_the_learner_finishes_it_and_returns(browser, live, lms, size):
    context = browser.new_context(viewport=VIEWPORTS[size], locale="en-US")
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    launch = lms.launch(live.url, LESSON, seed=7 if size == "desktop" else 11)
    order = [name for name, _ in parse_qsl(urlsplit(launch["url"]).query)]
    assert order != ["endpoint", "fetch", "actor", "registration", "activityId"]  # shuffled, as any LMS may
    before = len(lms.requests)
    opened(page, launch["url"])
    wait_for(lambda: "initialized" in lms.verbs(launch["registration"]), "initialized")
    asked = lms.requests[before:]
    first_put = next(i for i, (method, _) in enumerate(asked) if method == "PUT")
    assert asked[0][0] == "POST" and asked[0][1].startswith("/fetch/")
    assert {path for _, path in asked[1:first_put]} >= {"/xapi/activities/state", "/xapi/agents/profile"}
    assert not page.locator("nav.site").count()  # inside a course: no way out but the exit
    finish_the_lesson(page)
    wait_for(lambda: "passed" in lms.verbs(launch["registration"]), "passed")
    assert overflow(page) == 0
    page.get_by_role("button", name="Exit to your course").click()
    page.wait_for_url(f"{lms.url}/course?returned={launch['registration']}")
    # cmi5's order: initialized first, terminated last, each defined statement once, after what earned it
    # (passed after the last answer after the explorable, completed after the explanation, the last checkpoint)
    said = lms.verbs(launch["registration"])
    assert said[0] == "initialized" and said[-1] == "terminated" and "failed" not in said, said
    assert [said.count(verb) for verb in ("initialized", "completed", "passed", "terminated")] == [1, 1, 1, 1]
    assert said.index("passed") > max(i for i, verb in enumerate(said) if verb == "answered")
    assert said.index("completed") > said.index("responded")
    fetches = [path for method, path in lms.requests[before:] if method == "POST"]
    assert len(fetches) == 1  # the token was fetched once
    sent = lms.sent(launch["registration"])
    for statement in sent:
        assert statement["actor"] == launch["actor"]
        assert statement["context"]["extensions"][SESSION_ID] == launch["session"]
        defined = statement["object"]["id"] == launch["activity"] and CMI5 in categories(statement)
        assert defined == (
            statement["verb"]["id"].rsplit("/", 1)[1] in ("initialized", "completed", "passed", "terminated")
        )
    judged = {s["verb"]["id"].rsplit("/", 1)[1]: s for s in sent}
    assert MOVEON in categories(judged["completed"]) and MOVEON in categories(judged["passed"])
    assert judged["passed"]["result"]["score"]["scaled"] == 1.0
    assert sent[-1]["result"]["duration"].startswith("PT")
    assert lms.conflicts == 0 and not errors, errors
    models = pytest.importorskip(
        "ralph.models.xapi.base.statements", reason="Ralph (ralph-malph) is installed by .ci/run"
    )
    for statement in sent:
        models.BaseXapiStatement(**statement)
    context.close()


def test_leaving_sends_terminated_and_a_second_fetch_is_refused_with_what_to_do(page, live, lms):
    launch = lms.launch(live.url, LESSON, seed=1)
    opened(page, launch["url"])
    wait_for(lambda: "initialized" in lms.verbs(launch["registration"]), "initialized")
    before = len(lms.requests)
    opened(page, launch["url"])  # the same launch again: its fetch URL is spent
    wait_until(page, "document.getElementById('unit-status').textContent.includes('error 1')")
    status = page.locator("#unit-status").inner_text()
    assert "refused this launch" in status and "open the lesson again from your course" in status
    time.sleep(1)
    # the first page, left, sent its terminated as it went; the second fetched once, was refused, sent nothing
    assert sorted(method for method, _ in lms.requests[before:]) == ["POST", "PUT"]
    assert lms.verbs(launch["registration"]) == ["initialized", "terminated"]
    assert page.locator("#lesson-body h2").count()  # the lesson is still there to read
    assert not page.get_by_role("button", name="Exit to your course").count()


def test_a_store_that_refuses_then_recovers_receives_every_statement_once(page, live, lms):
    lms.preferences = {"languagePreference": "es-ES,en-US"}
    try:
        launch = lms.launch(live.url, LESSON, seed=2)
        lms.refuse = 3  # the store is down for the first three writes
        opened(page, launch["url"])
        assert page.evaluate("document.documentElement.lang") == "es"  # the LMS's language
        assert page.locator("#progress-title").inner_text() == "Tu progreso"
        page.locator("#prediction").fill("Las cabezas de inducción de la capa 2.")
        page.locator("#prediction").locator("xpath=ancestor::form").locator("button[type=submit]").click()
        wait_for(lambda: "answered" in lms.verbs(launch["registration"]), "the prediction", timeout=40)
        page.locator("#unit-exit").click()
        page.wait_for_url(f"{lms.url}/course?*", timeout=40_000 * PATIENCE)
    finally:
        lms.preferences = {"languagePreference": "en-US,es", "audioPreference": "on"}
    assert lms.refuse == 0
    assert lms.verbs(launch["registration"]) == ["initialized", "answered", "terminated"]
    assert lms.conflicts == 0
    puts = sum(1 for method, _ in lms.requests if method == "PUT")
    assert puts >= len(lms.order) + 3  # every refusal tried again, each statement stored once


def test_a_malformed_launch_answers_a_page_that_says_which_and_sends_nothing(page, live, lms):
    launch = lms.launch(live.url, LESSON)
    query = [(k, v) for k, v in parse_qsl(urlsplit(launch["url"]).query) if k != "actor"]
    query = [(k, "not-a-uuid" if k == "registration" else v) for k, v in query]
    before = len(lms.requests)
    response = page.goto(f"{live.url}/lessons/{LESSON}?{urlencode(query)}")
    assert response.status == 400
    problems = page.locator(".launch-problems li").all_inner_texts()
    assert problems == ["actor is missing", "registration must be a UUID"]
    time.sleep(0.5)
    assert lms.requests[before:] == []


def test_the_next_launch_of_a_registration_continues_the_lessons_progress(browser, live, lms):
    context = browser.new_context(viewport=VIEWPORTS["desktop"])
    page = context.new_page()
    first = lms.launch(live.url, LESSON, seed=4)
    opened(page, first["url"])
    page.locator("#prediction").fill("Layer 2's induction heads at the last position.")
    page.locator("#prediction").locator("xpath=ancestor::form").locator("button[type=submit]").click()
    wait_for_checkpoint(page, "predict")
    page.locator("#unit-exit").click()
    page.wait_for_url(f"{lms.url}/course?*")
    again = lms.launch(live.url, LESSON, seed=5, registration=first["registration"])  # a new session
    opened(page, again["url"])
    wait_for_checkpoint(page, "predict")  # the progress kept from the first session
    assert page.locator("#prediction").input_value() == "Layer 2's induction heads at the last position."
    wait_for(lambda: lms.verbs(first["registration"]).count("initialized") == 2, "the second initialized")
    said = lms.sent(first["registration"])
    sessions = [s["context"]["extensions"][SESSION_ID] for s in said]
    assert sessions == [first["session"]] * 3 + [again["session"]]  # the earlier session's answer is not sent again
    assert lms.conflicts == 0
    context.close()
