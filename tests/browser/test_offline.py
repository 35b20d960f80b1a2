"""With the server stopped and started again: the lesson says what is only on this device, what
reached the server, and updates its checkpoints live; the learner's words and the embedded
workbench's state come back after a reload; a failed compute greys out the stale numbers."""

from __future__ import annotations

import pytest

from ..api.helpers import EXPLANATION
from ..live import sqlite_server
from .conftest import (
    completed,
    do_the_four_manipulations,
    embedded_workbench,
    open_page,
    wait_for_checkpoint,
    wait_until,
    watched_page,
)

LESSON = "/lessons/multi-head-attention"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    live = sqlite_server(tmp_path_factory.mktemp("offline"))
    yield live
    live.stop()


@pytest.fixture
def tab(context, server):
    page = watched_page(context)
    yield page
    assert not page.errors, page.errors
    if server.proc.poll() is not None:
        server.start()


def progress(page):
    return completed(page)


def test_a_prediction_made_while_the_server_is_down_is_kept_then_delivered_live(tab, server):
    open_page(tab, server, LESSON)
    server.stop()
    tab.get_by_label("Your prediction").fill("Two features each; reuse loses dimensions 3-4.")
    tab.get_by_role("button", name="Record prediction").click()
    tab.get_by_text("Saved on this device; it will be sent when the server answers.").wait_for()
    assert "saved on this device" in tab.locator("#sync").inner_text()
    assert "predict" not in progress(tab)
    server.start()
    wait_for_checkpoint(tab, "predict")
    tab.get_by_text("Recorded on the server.").wait_for()
    assert "All your progress is on the server" in tab.locator("#sync").inner_text()
    tab.reload()
    tab.wait_for_selector("main[aria-busy=false]")
    assert tab.get_by_label("Your prediction").input_value() == "Two features each; reuse loses dimensions 3-4."
    assert "predict" in progress(tab)


def test_the_embedded_workbench_keeps_its_state_and_chips_follow_its_queue(tab, server):
    open_page(tab, server, LESSON)
    frame = embedded_workbench(tab)
    server.stop()
    frame.get_by_label("Token 1 dimension 4", exact=True).fill("1.7")
    wait_until(tab.frame("workbench"), "document.body.classList.contains('stale')")
    assert "Could not compute" in frame.locator("#status").inner_text()
    do_the_four_manipulations(frame)  # ticked on this device while the server is down
    assert frame.locator("[data-done=true]").count() == 4
    wait_until(tab, "document.getElementById('sync').dataset.pending !== '0'", timeout=10)
    assert "experiment" not in progress(tab)
    frame.get_by_label("Causal mask", exact=True).click()  # back on, so the state below is the edit's
    frame.get_by_label("Reuse head 1 features for both heads (broken)", exact=True).click()
    frame.get_by_label("Token 1 dimension 3", exact=True).fill("-0.5")
    frame.get_by_label("Token 2 dimension 1", exact=True).fill("0.2")
    server.start()
    wait_for_checkpoint(tab, "experiment")
    tab.reload()
    tab.wait_for_selector("main[aria-busy=false]")
    frame.locator("main[aria-busy=false]").wait_for()
    assert frame.get_by_label("Token 1 dimension 4", exact=True).input_value() == "1.7"
    assert not tab.frame("workbench").evaluate("document.body.classList.contains('stale')")


def test_an_explanation_comes_back_after_a_reload_from_the_server(tab, server):
    open_page(tab, server, LESSON)
    tab.get_by_label("Your explanation").fill(EXPLANATION)
    tab.get_by_role("button", name="Record explanation").click()
    tab.get_by_text("Recorded on the server.").wait_for()
    tab.evaluate("localStorage.clear()")  # the words must come from the server, not from this device
    tab.reload()
    tab.wait_for_selector("main[aria-busy=false]")
    assert tab.get_by_label("Your explanation").input_value() == EXPLANATION
