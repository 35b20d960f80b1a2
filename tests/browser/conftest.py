"""Browser tests: Playwright driving Debian's chromium against a real gunicorn."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from service.db.migrate import upgrade

from ..live import LiveServer

CHROMIUM = os.environ.get("WORKBENCH_TEST_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = pytest.mark.browser
# Under parallel workers (make test) pages take longer to draw: every wait for something to happen
# waits this many times longer (what is waited for, and what is asserted, is the same).
PATIENCE = 3.0 if os.environ.get("PYTEST_XDIST_WORKER") else 1.0


def pytest_configure(config):
    """Playwright's assertions (`expect`) wait as patiently as its actions do."""
    from playwright.sync_api import expect

    expect.set_options(timeout=5_000 * PATIENCE)


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/browser" in str(item.fspath):
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.skip(f"browser tests need Debian's chromium at {CHROMIUM} (apt-get install -y chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield Patient(browser)
        browser.close()


class Patient:
    """The browser, whose every new context waits PATIENCE times Playwright's default for what it waits for."""

    def __init__(self, browser):
        self.browser = browser

    def new_context(self, **kwargs):
        context = self.browser.new_context(**kwargs)
        context.set_default_timeout(30_000 * PATIENCE)
        return context

    def __getattr__(self, name):
        return getattr(self.browser, name)


class HostSite:
    """Another origin on this machine, standing for a course platform that embeds the workbench."""

    def __init__(self, directory: Path):
        import functools
        import http.server
        import threading

        handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(directory))
        handler.log_message = lambda *args: None
        self.directory = directory
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture(scope="module")
def host_site(tmp_path_factory):
    site = HostSite(tmp_path_factory.mktemp("host"))
    yield site
    site.server.shutdown()


@pytest.fixture(scope="module")
def live(tmp_path_factory, host_site):
    url = f"sqlite:///{tmp_path_factory.mktemp('browser') / 'wb.db'}"
    upgrade(url)
    server = LiveServer(
        {
            "WORKBENCH_DATABASE_URL": url,
            "WORKBENCH_RATELIMIT_ENABLED": "0",
            "WORKBENCH_FRAME_ANCESTORS": host_site.url,
            "WORKBENCH_EXPORT_SETTLE_SECONDS": "0",  # exports include what the test just stored
            "WORKBENCH_PSEUDO_LOCALE": "1",  # ?lang=en-XA, for the layout checks (test_locales.py)
        },
        workers=2,
    ).start()
    yield server
    server.stop()


@pytest.fixture
def context(browser):
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    yield context
    context.close()


def watched_page(context):
    """A new page that records its JavaScript errors in `page.errors` (a test asserts none)."""
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    return page


@pytest.fixture
def page(context, live):
    page = watched_page(context)
    page.outside = []
    page.on(
        "request",
        lambda r: (
            None if r.url.startswith((live.url, "data:", "about:", "http://127.0.0.1:")) else page.outside.append(r.url)
        ),
    )
    yield page
    page.unroute_all(behavior="ignoreErrors")  # a test's route still answering when its page goes
    assert not page.errors, page.errors
    assert not page.outside, f"requests left the origin: {page.outside}"


def wait_until(target, expression: str, timeout: float = 15.0, interval: float = 0.05):
    """Poll `expression` from the test side. Playwright's wait_for_function evaluates strings
    inside the page, which the service's Content-Security-Policy (no unsafe-eval) forbids."""
    import time

    deadline = time.monotonic() + timeout * PATIENCE
    while True:
        if target.evaluate(expression):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for: {expression}")
        time.sleep(interval)


CHECKED = "[...document.querySelectorAll('#progress li[data-completed=true]')].map((l) => l.dataset.checkpoint)"


def completed(target) -> set[str]:
    """The checkpoints the lesson's progress list shows as done (a page or a frame)."""
    return set(target.evaluate(CHECKED) or [])


def wait_for_checkpoint(target, checkpoint: str, timeout: float = 20.0) -> None:
    """Until the lesson's progress list marks `checkpoint` done."""
    wait_until(target, f"{CHECKED}.includes('{checkpoint}')", timeout=timeout)


def do_the_four_manipulations(frame):
    """The lesson's four manipulations in the workbench (a page or an iframe's frame locator)."""
    frame.get_by_label("Token 1 dimension 3", exact=True).fill("2")
    frame.get_by_label("Token 2 dimension 1", exact=True).fill("-1")
    frame.get_by_label("Causal mask", exact=True).click()
    frame.get_by_label("Reuse head 1 features for both heads (broken)", exact=True).click()


def open_page(page, live, path: str):
    page.goto(live.url + path)
    page.wait_for_selector("main[aria-busy=false]", timeout=15000 * PATIENCE)
    return page


def demo_cohort(live, learners: int, seed: int, platform: str, *scope_sets: str) -> list[str]:
    """Store a demo cohort for `platform` in the live server's database; one key per scope set."""
    from service.db import Database
    from service.db.platforms import create_key
    from service.demo import load
    from service.lessons import load_lessons

    db = Database(live.env["WORKBENCH_DATABASE_URL"])
    load(db, load_lessons("content/lessons"), learners, seed=seed, platform=platform)
    tokens = []
    with db.write() as session:
        for scopes in scope_sets or ("analytics:read",):
            key, _ = create_key(session, platform, frozenset(scopes.split(",")))
            tokens.append(key.token)
    db.dispose()
    return tokens


# What each locale calls a lesson's prediction and explanation forms (its catalog's words, written out).
FORMS = {
    "en": ("Your prediction", "Record prediction", "Your explanation", "Record explanation"),
    "es": ("Tu predicción", "Guardar la predicción", "Tu explicación", "Guardar la explicación"),
    "zh-CN": ("你的预测", "保存预测", "你的解释", "保存解释"),
}


def predict_in_lesson(page, live, lesson: str, locale: str, viewport: tuple[int, int], prediction: str):
    """A new learner opens `lesson` in `locale` at `viewport`, records `prediction` and reaches the
    embedded explorable: its frame locator, and the locale's labels of the explanation form."""
    page.set_viewport_size({"width": viewport[0], "height": viewport[1]})
    open_page(page, live, f"{lesson}?lang={locale}")
    assert page.evaluate("document.documentElement.lang") == locale
    label, record, explanation, record_explanation = FORMS[locale]
    page.get_by_label(label).fill(prediction)
    page.get_by_role("button", name=record).click()
    wait_for_checkpoint(page, "predict")
    return embedded_workbench(page), explanation, record_explanation


def complete_lesson(page, live, lesson: str, locale: str, viewport: tuple[int, int], said: tuple[str, str], manipulate):
    """A new learner predicts (`said[0]`), does the embedded explorable's four manipulations
    (`manipulate(frame)`), and explains (`said[1]`): every checkpoint of `lesson` completes. The frame."""
    frame, explanation, record_explanation = predict_in_lesson(page, live, lesson, locale, viewport, said[0])
    manipulate(frame)
    wait_for_checkpoint(page, "experiment")
    assert frame.locator("[data-manipulation][data-done=true]").count() == 4
    page.get_by_label(explanation).fill(said[1])
    page.get_by_role("button", name=record_explanation).click()
    wait_for_checkpoint(page, "explain")
    assert completed(page) == {"predict", "experiment", "explain"}
    return frame


def computed(live, path: str, body: dict) -> dict:
    """What the live API answers `body` at `path` (independently of any page), checked to be a 200."""
    import requests

    response = requests.post(live.url + path, json=body, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def values(locator) -> list[float | None]:
    """The numbers a page's cells show, read from their data-value (None where a cell holds none)."""
    return [None if v == "" else float(v) for v in locator.evaluate_all("cells => cells.map(c => c.dataset.value)")]


def embedded_workbench(page):
    """The lesson's embedded workbench, scrolled to so that it loads (the lesson loads it lazily,
    as the learner nears it) and drawn: its frame locator."""
    page.locator("#workbench-frame").scroll_into_view_if_needed()
    frame = page.frame_locator("#workbench-frame")
    frame.locator("main[aria-busy=false]").wait_for()
    return frame


# The two sizes every learner-facing point is proven at (the layout tests' SIZES, as viewports).
VIEWPORTS = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}
