"""A learner's walk through the lesson: every checkpoint recorded and kept after a reload;
a host page receives the workbench's events; the offline queue re-sends with the same ids."""

from .conftest import open_page, wait_until

LESSON = "/lessons/multi-head-attention"


def done(page):
    return set(filter(None, (page.locator("body").get_attribute("data-progress") or "").split(",")))


def wait_done(page, checkpoint):
    wait_until(page, f"(document.body.dataset.progress || '').split(',').includes('{checkpoint}')", timeout=20)


def test_all_four_checkpoints_with_the_mouse_and_kept_after_reload(page, live):
    open_page(page, live, LESSON)
    assert done(page) == set()
    assert page.locator(".directive-answer").is_hidden()
    page.get_by_label("Your prediction").fill("Each head is 2 wide; reusing slice 0 loses features 3-4.")
    page.get_by_role("button", name="Record prediction").click()
    wait_done(page, "predict")
    assert page.locator(".directive-answer").is_visible()

    frame = page.frame_locator("#workbench-frame")
    frame.locator("body[data-ready=true]").wait_for()
    frame.get_by_label("Token 1 dimension 3", exact=True).fill("2")
    wait_done(page, "experiment")

    page.get_by_label("Tests passed").fill("9")
    page.get_by_label("Tests failed").fill("0")
    page.get_by_role("button", name="Report result").click()
    wait_done(page, "implement")

    page.get_by_label("Your explanation").fill("Only head 2 changed; swapping heads breaks W_O.")
    page.get_by_role("button", name="Record explanation").click()
    wait_done(page, "explain")
    assert done(page) == {"predict", "experiment", "implement", "explain"}

    page.reload()
    page.wait_for_selector("body[data-ready=true]")
    assert done(page) == {"predict", "experiment", "implement", "explain"}
    assert page.locator("#progress li.done").count() == 4
    page.goto(live.url + "/")
    page.wait_for_selector("body[data-ready=true]")
    assert page.locator("[data-lesson=multi-head-attention]").get_attribute("data-completed") == "4"


def test_a_failing_test_run_is_an_attempt_not_a_completion(page, live):
    open_page(page, live, LESSON)
    page.get_by_label("Tests passed").fill("3")
    page.get_by_label("Tests failed").fill("2")
    page.get_by_role("button", name="Report result").click()
    page.get_by_text("Recorded an attempt (3 passed, 2 failed).").wait_for()
    page.reload()
    page.wait_for_selector("body[data-ready=true]")
    assert "implement" not in done(page)


def test_keyboard_only_walk_through_the_lesson(page, live):
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
    wait_done(page, "predict")
    tab_to("#workbench-frame")  # focus enters the embedded workbench
    frame = page.frame("workbench") or page.frames[1]
    for _ in range(10):
        page.keyboard.press("Tab")
        if frame.evaluate("document.activeElement && document.activeElement.id === 'token-1-dim-1'"):
            break
    page.keyboard.press("ArrowUp")  # a number input steps by 0.1
    wait_done(page, "experiment")
    tab_to("#tests-passed")
    page.keyboard.press("Control+A")
    page.keyboard.type("5")
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    wait_done(page, "implement")
    tab_to("#explanation")
    page.keyboard.type("Head 1 did not change.")
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    wait_done(page, "explain")


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
    frame.locator("body[data-ready=true]").wait_for()
    frame.get_by_label("Token 2 dimension 1", exact=True).fill("1.5")
    wait_until(page, "window.received.length > 0", timeout=10.0)
    message = page.evaluate("window.received[0]")
    assert message["type"] == "parameter-changed" and message["instanceId"] == "multi-head-workbench"
    assert message["data"] == {"parameter": "token", "token": 2, "dimension": 1, "value": 1.5}


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
