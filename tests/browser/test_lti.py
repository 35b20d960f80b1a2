"""A learner opens the lesson from their course: the platform's page starts the LTI login in
an iframe, the launch lands on the lesson inside it, two checkpoints later the platform's line
item holds 2/4, and restarting the service in between loses no score."""

from __future__ import annotations

import time
from contextlib import contextmanager
from urllib.parse import urlencode

import requests
from click.testing import CliRunner

from service.cli import main
from service.db import Database
from service.db.migrate import upgrade
from service.lti.registrations import NewRegistration, register
from tests.lti.lms_server import LmsServer
from tests.lti.platform import Platform

from ..api.helpers import EXPLANATION
from ..live import LiveServer
from .conftest import wait_for_checkpoint, wait_until, watched_page

LEARNER = "http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"


def next_frame(page, path: str):
    """The tool's page inside the platform's iframe, once launched and ready."""
    deadline = time.monotonic() + 20
    while not any(f.url.endswith(path) for f in page.frames):
        assert time.monotonic() < deadline, [f.url for f in page.frames]
        page.wait_for_timeout(50)
    frame = next(f for f in page.frames if f.url.endswith(path))
    wait_until(frame, "document.querySelector('main').getAttribute('aria-busy') === 'false'")
    return frame


def lesson_frame(page):
    return next_frame(page, "/lessons/multi-head-attention")


def wait_done(frame, checkpoint):
    wait_for_checkpoint(frame, checkpoint)


def send_grades(url, monkeypatch) -> str:
    monkeypatch.setenv("WORKBENCH_DATABASE_URL", url)
    return CliRunner().invoke(main, ["lti", "grades"]).output.strip()


@contextmanager
def course_and_tool(tmp_path):
    """A course platform (tests/lti/lms_server.py) and this tool, registered with each other:
    (lms, tool, the tool's database URL); the tool stops afterwards."""
    url = f"sqlite:///{tmp_path / 'tool.db'}"
    upgrade(url)
    with LmsServer(Platform()) as lms:
        db = Database(url)
        with db.write() as session:
            register(session, NewRegistration(**lms.registration()))
        db.dispose()
        tool = LiveServer(
            {"WORKBENCH_DATABASE_URL": url, "WORKBENCH_RATELIMIT_ENABLED": "0", "WORKBENCH_FRAME_ANCESTORS": lms.url}
        ).start()
        try:
            lms.tool = tool.url
            lms.tool_jwks = requests.get(tool.url + "/lti/jwks", timeout=10).json()
            yield lms, tool, url
        finally:
            tool.stop()


def test_from_the_course_page_to_two_of_four_in_the_gradebook(browser, tmp_path, monkeypatch):
    with course_and_tool(tmp_path) as (lms, tool, url):
        context = browser.new_context(viewport={"width": 1280, "height": 1000})
        page = watched_page(context)
        page.goto(lms.url + "/course")
        frame = lesson_frame(page)
        frame.get_by_label("Your prediction").fill("Each head is 2 wide; reusing slice 0 loses features 3-4.")
        frame.get_by_role("button", name="Record prediction").click()
        wait_done(frame, "predict")
        assert send_grades(url, monkeypatch) == "sent 1 scores, 0 failed (retried later)"

        tool.stop()  # a restart between the two checkpoints
        tool.start()
        frame.get_by_label("Your explanation").fill(EXPLANATION)
        frame.get_by_role("button", name="Record explanation").click()
        wait_done(frame, "explain")
        assert send_grades(url, monkeypatch) == "sent 1 scores, 0 failed (retried later)"
        assert send_grades(url, monkeypatch) == "sent 0 scores, 0 failed (retried later)"

        scores = lms.scores["/lineitems/1"]
        assert [(s["scoreGiven"], s["scoreMaximum"]) for s in scores] == [(1, 4), (2, 4)]
        assert scores[-1]["userId"] == "user-42" and scores[-1]["activityProgress"] == "InProgress"
        assert not page.errors, page.errors
        context.close()

        lms.members = [{"user_id": "user-42", "roles": [LEARNER], "status": "Active", "name": "Ada L."}]
        teacher = browser.new_context(viewport={"width": 1280, "height": 1000})
        page = watched_page(teacher)
        page.goto(lms.url + "/teach")  # the instructor opens the dashboard from the course
        frame = next_frame(page, "/dashboard")
        wait_until(frame, "!document.getElementById('course').hidden")
        text = frame.locator("#course").inner_text()
        assert "Your course: Attention, week 3" in text and "hidden: fewer than 5 learners" in text
        assert "Ada" not in text
        assert not page.errors, page.errors
        teacher.close()


def test_an_administrator_pastes_one_url_and_the_platform_registers_the_tool(browser, tmp_path, monkeypatch):
    """Moodle's "Register a tool by URL", played by the loopback platform: the invitation opens in a
    new window, the tool registers itself and tells the platform's window to close the dialog; the
    course page's launch then works with no other step."""
    url = f"sqlite:///{tmp_path / 'tool.db'}"
    upgrade(url)
    with LmsServer(Platform(client_id="dynamic-client-1", deployment="deployment-7")) as lms:
        lms.platform.issuer = lms.url
        tool = LiveServer(
            {"WORKBENCH_DATABASE_URL": url, "WORKBENCH_RATELIMIT_ENABLED": "0", "WORKBENCH_FRAME_ANCESTORS": lms.url}
        ).start()
        try:
            monkeypatch.setenv("WORKBENCH_DATABASE_URL", url)
            monkeypatch.setenv("WORKBENCH_PUBLIC_URL", tool.url)
            invitation = CliRunner().invoke(main, ["lti", "invite", "--platform", "moodle"]).output.splitlines()[0]
            assert invitation.startswith(tool.url + "/lti/register?invitation=")
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            page = watched_page(context)
            page.goto(lms.url + "/register-tool?" + urlencode({"invitation": invitation}))
            wait_until(page, "document.getElementById('status').textContent === 'closed'")
            listed = CliRunner().invoke(main, ["lti", "list"]).output
            assert f"{lms.url}\tdynamic-client-1\tdeployment-7" in listed and listed.strip().endswith("dynamic")
            lms.tool = tool.url
            lms.tool_jwks = requests.get(tool.url + "/lti/jwks", timeout=10).json()
            page.goto(lms.url + "/course")  # the first launch from the registered platform
            lesson_frame(page)
            assert not page.errors, page.errors
            context.close()
        finally:
            tool.stop()
