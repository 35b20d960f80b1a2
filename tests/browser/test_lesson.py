"""A learner's walk through the lesson: every checkpoint recorded and kept after a reload;
a host page receives the workbench's events; the offline queue re-sends with the same ids;
the implement checkpoint is earned by answering a challenge with the learner's own code."""

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from playwright.sync_api import expect

from service.lessons import load_catalog

from ..api.helpers import EXPLANATION
from ..exercise.test_exercise import TYPESCRIPT_READY
from .conftest import (
    PATIENCE,
    VIEWPORTS,
    completed,
    do_the_four_manipulations,
    embedded_workbench,
    open_page,
    wait_for_checkpoint,
    wait_until,
)

ROOT = Path(__file__).resolve().parents[2]
IMPLEMENTATIONS = "tests/exercise/implementations"


def submit(page, monkeypatch=None, mistake="", print_only=False):
    """What the learner does in their terminal: run the command the lesson shows, word for word,
    with their own file in place of the starter."""
    words = shlex.split(page.locator("#challenge-command").inner_text())
    starter = next(w for w in words if "/starter." in w)
    words[words.index(starter)] = f"{IMPLEMENTATIONS}/handwritten{Path(starter).suffix}"
    if words[0] == "python":
        words[0] = sys.executable
    env = {**os.environ, "MHA_MISTAKE": mistake}
    done = subprocess.run(
        words + (["--print"] if print_only else []), cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    done.output = done.stdout if print_only else done.stdout + done.stderr
    done.exit_code = done.returncode
    return done


LESSON = "/lessons/multi-head-attention"


@pytest.mark.parametrize("size", VIEWPORTS)
def test_all_four_checkpoints_with_the_mouse_and_kept_after_reload(page, live, monkeypatch, size):
    page.set_viewport_size(VIEWPORTS[size])
    open_page(page, live, LESSON)
    assert completed(page) == set()
    assert page.locator("[data-answers=predict]").is_hidden() and page.locator("[data-answers=explain]").is_hidden()
    page.get_by_label("Your prediction").fill("Each head is 2 wide; reusing slice 0 loses features 3-4.")
    page.get_by_role("button", name="Record prediction").click()
    wait_for_checkpoint(page, "predict")
    assert page.locator("[data-answers=predict]").is_visible()
    assert page.locator("[data-answers=explain]").is_hidden()  # each answer after its own question

    frame = embedded_workbench(page)
    frame.get_by_label("Token 1 dimension 3", exact=True).fill("2")
    page.wait_for_timeout(1500)  # one edit is sent, and does not complete the experiment
    assert "experiment" not in completed(page)
    do_the_four_manipulations(frame)
    wait_for_checkpoint(page, "experiment")

    page.get_by_role("button", name="Get a challenge").click()
    page.locator("#challenge-command").wait_for()
    result = submit(page, monkeypatch)
    assert result.exit_code == 0, result.output
    wait_for_checkpoint(page, "implement")  # the page learns of it without a reload
    page.get_by_text("Verified:").wait_for()  # and says how: the server checked the numbers

    page.get_by_label("Your explanation").fill(EXPLANATION)
    page.get_by_role("button", name="Record explanation").click()
    wait_for_checkpoint(page, "explain")
    assert completed(page) == {"predict", "experiment", "implement", "explain"}
    explained = page.locator("[data-answers=explain]")
    assert explained.is_visible() and "A model answer" in explained.inner_text()  # then the model answer
    assert "head 1's exactly as they were" in explained.inner_text()

    page.reload()
    page.wait_for_selector("main[aria-busy=false]")
    assert completed(page) == {"predict", "experiment", "implement", "explain"}
    assert page.locator("#progress li.done").count() == 4
    page.goto(live.url + "/")
    page.wait_for_selector("main[aria-busy=false]")
    assert page.locator("[data-lesson=multi-head-attention]").get_attribute("data-completed") == "4"


def test_a_wrong_implementation_is_named_and_does_not_complete(page, live, monkeypatch):
    open_page(page, live, LESSON)
    page.get_by_role("button", name="Get a challenge").click()
    page.locator("#challenge-command").wait_for()
    result = submit(page, monkeypatch, mistake="interleaved_split")
    assert result.exit_code == 1 and "[interleaved_split]" in result.output
    page.get_by_text("Not yet (interleaved_split)").wait_for()
    page.reload()
    page.wait_for_selector("main[aria-busy=false]")
    assert "implement" not in completed(page)


def test_pasted_answers_are_checked_and_complete_implement(page, live, monkeypatch):
    open_page(page, live, LESSON)
    page.get_by_role("button", name="Get a challenge").click()
    page.locator("#challenge-command").wait_for()
    wrong = submit(page, monkeypatch, mistake="diagonal_masked", print_only=True)
    page.get_by_text("Paste the answers instead").click()
    page.get_by_label("Answers printed by the submit script with --print").fill(wrong.output)
    page.get_by_role("button", name="Check pasted answers").click()
    page.get_by_text("Not yet (diagonal_masked)").wait_for()
    assert "implement" not in completed(page)
    right = submit(page, monkeypatch, print_only=True)
    assert json.loads(right.output)["answers"]
    page.get_by_label("Answers printed by the submit script with --print").fill(right.output)
    page.get_by_role("button", name="Check pasted answers").click()
    wait_for_checkpoint(page, "implement")


def test_an_open_challenge_survives_a_reload_and_the_command_follows_the_language(page, live):
    open_page(page, live, LESSON)
    assert page.get_by_label("Python").is_checked()
    assert page.locator("#exercise-test").inner_text() == "pytest exercises/multi-head-attention/tests"
    assert page.locator("#exercise-download").get_attribute("href").endswith("/python.zip")
    page.get_by_role("button", name="Get a challenge").click()
    page.locator("#challenge-command").wait_for()
    python = page.locator("#challenge-command").inner_text()
    assert python.startswith(
        "python exercises/multi-head-attention/submit.py exercises/multi-head-attention/starter.py"
    )
    page.get_by_label("TypeScript").check()
    assert page.locator("#exercise-test").inner_text() == (
        "pnpm exec vitest run exercises/multi-head-attention/tests --config vitest.exercise.config.ts"
    )
    typescript = page.locator("#challenge-command").inner_text()
    assert typescript.startswith("pnpm run submit -- exercises/multi-head-attention/starter.ts --challenge ")
    assert typescript.split("--challenge ")[1] == python.split("--challenge ")[1]
    trace = page.locator("#exercise-trace").inner_text()
    assert trace.startswith("pnpm run trace -- exercises/multi-head-attention/starter.ts 'http")
    assert "/explorables/multi-head-attention#t=" in trace

    page.reload()
    page.wait_for_selector("main[aria-busy=false]")
    page.locator("#challenge-command").wait_for()
    assert page.get_by_label("TypeScript").is_checked()  # the choice is kept, and so is the challenge
    assert page.locator("#challenge-command").inner_text() == typescript
    if not TYPESCRIPT_READY:
        pytest.skip("the TypeScript submit needs Node 20, pnpm and `pnpm install`")
    result = submit(page)
    assert result.exit_code == 0, result.output
    wait_for_checkpoint(page, "implement")


@pytest.mark.parametrize("size", VIEWPORTS)
def test_the_trace_command_follows_the_embedded_workbench(page, live, size):
    page.set_viewport_size(VIEWPORTS[size])
    open_page(page, live, LESSON)
    frame = embedded_workbench(page)
    frame.get_by_label("Token 1 dimension 3", exact=True).fill("2")
    wait_until(page, "document.getElementById('exercise-trace').textContent.includes('t=1,0.5,2,1')")
    page.reload()  # the workbench restores the learner's tokens; the command follows it, not the default
    page.wait_for_selector("main[aria-busy=false]")
    embedded_workbench(page)
    wait_until(page, "document.getElementById('exercise-trace').textContent.includes('t=1,0.5,2,1')")


@pytest.mark.parametrize("size", VIEWPORTS)
def test_a_failure_mode_opens_in_the_lessons_own_workbench_and_a_new_tab_has_a_way_back(page, live, context, size):
    page.set_viewport_size(VIEWPORTS[size])
    open_page(page, live, LESSON)
    frame = embedded_workbench(page)
    frame.get_by_label("Token 1 dimension 3", exact=True).fill("2")
    link = page.locator('a[data-failure-mode="swapped_head_order"]')
    link.click()
    assert page.url.endswith(LESSON)  # the lesson stays
    inside = page.frame_locator("#workbench-frame")
    expect(inside.get_by_label("Compare with")).to_have_value("swapped_head_order")
    assert inside.get_by_label("Token 1 dimension 3", exact=True).input_value() == "2"  # the learner's tokens kept
    with context.expect_page() as opened:
        link.click(modifiers=["Control"])
    tab = opened.value
    tab.wait_for_selector("main[aria-busy=false]")
    back = tab.locator("#back-to-lesson")
    assert back.is_visible() and back.get_attribute("href") == LESSON


def scrolled(page) -> None:
    """Wait until the page has stopped scrolling (two readings 100 ms apart agree)."""
    last = None
    for _ in range(100):
        now = page.evaluate("window.scrollY")
        if now == last:
            return
        last = now
        page.wait_for_timeout(100)


def test_after_the_four_manipulations_mask_after_softmax_turns_the_mask_on_and_shows_its_bug(page, live):
    """The manipulations leave the mask off; the lesson's "Mask after softmax" link turns it on, so
    the comparison shows where the numbers part. Chosen by hand with the mask off, the workbench says
    what to turn on."""
    open_page(page, live, LESSON)
    frame = embedded_workbench(page)
    do_the_four_manipulations(frame)
    expect(frame.get_by_label("Causal mask", exact=True)).not_to_be_checked()
    page.locator('a[data-failure-mode="mask_after_softmax"]').click()
    expect(frame.get_by_label("Compare with")).to_have_value("mask_after_softmax")
    expect(frame.get_by_label("Causal mask", exact=True)).to_be_checked()
    expect(frame.locator("#status")).to_contain_text("the first stage that differs")
    scrolled(page)  # the link scrolls the workbench into view, smoothly: a click meanwhile lands elsewhere
    frame.get_by_label("Causal mask", exact=True).click()
    expect(frame.get_by_label("Causal mask", exact=True)).not_to_be_checked()
    expect(frame.locator("#status")).to_contain_text("Turn on “Causal mask” to see what it does")


def test_a_failure_mode_chosen_before_the_workbench_has_loaded_opens_in_it(page, live):
    """The embedded workbench loads as the learner nears it: a failure mode chosen from the lesson
    before that still opens in it, with the lesson's tokens."""
    page.set_viewport_size({"width": 390, "height": 844})
    open_page(page, live, LESSON)
    frame_is = page.evaluate("document.getElementById('workbench-frame').dataset.loaded || 'not loaded'")
    assert frame_is == "not loaded"  # the lesson's first screen is text: the workbench has not loaded
    page.evaluate("document.querySelector('a[data-failure-mode=\"no_scaling\"]').click()")
    inside = page.frame_locator("#workbench-frame")
    expect(inside.get_by_label("Compare with")).to_have_value("no_scaling")
    assert inside.get_by_label("Token 1 dimension 1", exact=True).input_value() == "1"


def test_reported_test_counts_from_the_browser_do_not_complete_implement(page, live):
    open_page(page, live, LESSON)
    status = page.evaluate(
        """fetch('/api/v1/events', {method: 'POST', headers: {'Content-Type': 'application/json'},
             body: JSON.stringify({id: crypto.randomUUID(), lesson: 'multi-head-attention', checkpoint: 'implement',
               event: 'completed', data: {tests: {passed: 3, failed: 0}}, occurred_at: new Date().toISOString()})})
           .then(r => r.status)"""
    )
    assert status == 422
    page.reload()
    page.wait_for_selector("main[aria-busy=false]")
    assert "implement" not in completed(page)


def test_keyboard_only_walk_through_the_lesson(page, live, monkeypatch):
    open_page(page, live, LESSON)

    def tab_to(selector, limit=120):
        for _ in range(limit):
            page.keyboard.press("Tab")
            if page.evaluate(f"document.activeElement && document.activeElement.matches({selector!r})"):
                return
        raise AssertionError(f"Tab never reached {selector}")

    tab_to("#prediction")
    page.keyboard.type("Two features per head.")
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    wait_for_checkpoint(page, "predict")
    # Tab enters the embedded workbench once it has drawn (before that, focus passes it by):
    # entering the frame focuses its first control, and Tab goes on from there.
    embedded_workbench(page)
    tab_to("#workbench-frame")
    frame = page.frame("workbench") or page.frames[1]
    for _ in range(10):
        if frame.evaluate("document.activeElement && document.activeElement.id === 'token-1-dim-1'"):
            break
        page.keyboard.press("Tab")
    else:
        raise AssertionError("Tab never reached token 1, dimension 1 in the workbench")
    page.keyboard.press("ArrowUp")  # a number input steps by 0.1: dimension 1, the first two
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    page.keyboard.press("ArrowUp")  # dimension 3, the last two
    for control in ("causal", "reuse"):  # after the twelve inputs, the controls
        for _ in range(15):
            if frame.evaluate(f"document.activeElement && document.activeElement.id === '{control}'"):
                break
            page.keyboard.press("Tab")
        page.keyboard.press("Space")
    wait_for_checkpoint(page, "experiment")
    tab_to("#new-challenge")
    page.keyboard.press("Enter")
    page.locator("#challenge-command").wait_for()
    assert submit(page, monkeypatch).exit_code == 0
    wait_for_checkpoint(page, "implement")
    tab_to("#explanation")
    page.keyboard.type("Head 1 did not change when I edited the last two coordinates of a token.")
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    wait_for_checkpoint(page, "explain")


def test_focus_is_visible(page, live):
    open_page(page, live, LESSON)
    page.keyboard.press("Tab")
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline not in ("none", "")


def test_a_host_page_receives_the_workbench_events(page, live, host_site):
    # The platform's page lives on another origin, listed in WORKBENCH_FRAME_ANCESTORS.
    (host_site.directory / "course.html").write_text(
        f"<!doctype html><title>Host</title><iframe id=wb src='{live.url}/explorables/multi-head-attention' "
        "height=850 width=1000></iframe><script>window.received=[];addEventListener('message',"
        "e=>window.received.push(e.data))</script>"
    )
    page.goto(host_site.url + "/course.html")
    frame = page.frame_locator("#wb")
    frame.locator("main[aria-busy=false]").wait_for()
    frame.get_by_label("Token 2 dimension 1", exact=True).fill("1.5")
    changed = "window.received.filter(m => m.type === 'parameter-changed')"
    wait_until(page, f"{changed}.length > 0", timeout=10.0)
    message = page.evaluate(f"{changed}[0]")
    heights = page.evaluate("window.received.filter(m => m.type === 'height').map(m => m.height)")
    assert heights and all(h > 300 for h in heights)  # the host can size its iframe to the workbench
    assert message["type"] == "parameter-changed" and message["instanceId"] == "multi-head-workbench"
    edited = [[1, 0.5, -0.5, 1], [0.2, 1, 1.5, -0.3], [-1, 0.3, 0.8, 0.6]]  # the preset's tokens
    assert message["data"] == {
        "parameter": "token",
        "token": 2,
        "dimension": 1,
        "value": 1.5,
        "manipulation": "first-two",
        # a token manipulation carries the edit itself (the server's engine judges the prediction on it)
        "tokens_before": edited,
        "tokens": [edited[0], [1.5, *edited[1][1:]], edited[2]],
        "causal": True,
    }


def test_offline_events_are_re_sent_with_the_same_ids_when_the_server_is_back(page, live):
    open_page(page, live, "/explorables/multi-head-attention")
    page.route("**/api/v1/events", lambda route: route.abort("connectionrefused"))
    page.get_by_label("Token 3 dimension 2", exact=True).fill("0.9")
    wait_until(page, "JSON.parse(localStorage.getItem('workbench.outbox') || '[]').length > 0", timeout=10.0)
    queued = page.evaluate("JSON.parse(localStorage.getItem('workbench.outbox')).map(e => e.id)")
    page.unroute("**/api/v1/events")
    wait_until(page, "JSON.parse(localStorage.getItem('workbench.outbox') || '[]').length === 0", timeout=15.0)
    learner = page.evaluate("fetch('/api/v1/session').then(r => r.json()).then(s => s.learner)")
    events = page.evaluate(f"fetch('/api/v1/learners/{learner}/events').then(r => r.json())")["events"]
    stored = [e["id"] for e in events]
    assert set(queued) <= set(stored) and len(stored) == len(set(stored))


def test_no_question_shows_its_answer_before_it_is_given_and_prerequisites_read_as_titles(page, live):
    open_page(page, live, "/lessons/multi-head-attention")
    lesson = load_catalog("content/lessons")["multi-head-attention"]
    forms = page.locator("section.directive-items form.item-form")
    assert forms.count() == sum(i.asked_in("pre") for i in lesson.items) + sum(i.asked_in("post") for i in lesson.items)
    text = page.locator("main").inner_text()
    assert not [c.misconception for i in lesson.items for c in i.choices if c.misconception and c.misconception in text]
    assert page.locator(".item-feedback.correct, .item-feedback.wrong").count() == 0
    assert page.locator("section.directive-self-check").count() == 0  # the self-checks are items now
    before = page.locator("#lesson-header li").all_inner_texts()[-2:]
    assert before == [
        "Embeddings and positional information (not in this catalog yet)",
        "Self-attention (not in this catalog yet)",
    ]
    assert page.locator("#lesson-header a[href^='/lessons/']").count() == 0  # neither is here to link to


def test_a_prerequisite_in_the_catalog_is_a_link_to_it(page, live, tmp_path):
    import shutil

    from tests.live import sqlite_server

    content = tmp_path / "lessons"
    content.mkdir()
    shutil.copy("content/lessons/multi-head-attention.md", content)
    (content / "heads-in-practice.md").write_text(
        "---\nid: heads-in-practice\ntitle: Heads in practice\norder: 12\nobjectives: [read trained heads]\n"
        "prerequisites: [multi-head-attention, {id: rotary-embeddings, title: Rotary embeddings}]\n"
        "checkpoints:\n  - id: predict\n    title: Predict\n    completion: learner\n    requires: text\n---\n"
        '# Heads in practice\n\n:::predict{checkpoint="predict"}\nWhat will a trained head attend to?\n:::\n'
    )
    server = sqlite_server(tmp_path, WORKBENCH_CONTENT_DIR=str(content))
    try:
        page.goto(server.url + "/lessons/heads-in-practice")
        page.wait_for_selector("main[aria-busy=false]", timeout=15000 * PATIENCE)
        link = page.locator("#lesson-header a[href='/lessons/multi-head-attention']")
        assert link.inner_text() == "Multi-head attention"
        assert "Rotary embeddings (not in this catalog yet)" in page.locator("#lesson-header").inner_text()
    finally:
        server.stop()


def in_view(page, locator) -> bool:
    """Whether an element of the page (or of the embedded workbench's frame) is on screen now."""
    box = locator.bounding_box()  # in the top page's coordinates, frames included
    size = page.viewport_size
    return box is not None and box["height"] > 0 and 0 <= box["y"] and box["y"] + box["height"] <= size["height"]


@pytest.mark.parametrize("size", [(1280, 800), (390, 844)], ids=["desktop", "phone"])
def test_a_completion_is_said_where_the_learner_is_looking(page, live, size):
    """Completing a checkpoint puts a polite announcement on screen by what the learner used: the
    lesson's button for a prediction, inside the embedded workbench for the experiment."""
    page.set_viewport_size({"width": size[0], "height": size[1]})
    open_page(page, live, LESSON)
    page.get_by_label("Your prediction").fill("Each head is 2 wide; reusing slice 0 loses features 3-4.")
    page.get_by_role("button", name="Record prediction").click()
    wait_for_checkpoint(page, "predict")
    said = page.locator("[data-announce=checkpoint]")
    said.wait_for()
    assert "Checkpoint complete" in said.inner_text() and said.get_attribute("aria-live") == "polite"
    assert in_view(page, said)
    frame = embedded_workbench(page)
    do_the_four_manipulations(frame)
    inside = frame.locator("[data-announce=checkpoint]")
    inside.filter(has_text="All four manipulations done").wait_for()
    assert in_view(page, inside)
