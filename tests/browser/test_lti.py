"""A learner opens the lesson from their course: the platform's page starts the LTI login in
an iframe, the launch lands on the lesson inside it, two checkpoints later the platform's line
item holds 2/4, and restarting the service in between loses no score."""

from __future__ import annotations

import requests
from click.testing import CliRunner

from service.cli import main
from service.db import Database
from service.db.migrate import upgrade
from service.lti.registrations import NewRegistration, register
from tests.lti.lms_server import LmsServer
from tests.lti.platform import Platform

from ..live import LiveServer
from .conftest import watched_page, wait_until


def lesson_frame(page):
    frame = next(f for f in page.frames if f.url.endswith("/lessons/multi-head-attention"))
    wait_until(frame, "document.body.dataset.ready === 'true'")
    return frame


def wait_done(frame, checkpoint):
    wait_until(frame, f"(document.body.dataset.progress || '').split(',').includes('{checkpoint}')", timeout=20)


def send_grades(url, monkeypatch) -> str:
    monkeypatch.setenv("WORKBENCH_DATABASE_URL", url)
    return CliRunner().invoke(main, ["lti", "grades"]).output.strip()


def test_from_the_course_page_to_two_of_four_in_the_gradebook(browser, tmp_path, monkeypatch):
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
            frame.get_by_label("Your explanation").fill("Only head 2 changed; swapping heads breaks W_O.")
            frame.get_by_role("button", name="Record explanation").click()
            wait_done(frame, "explain")
            assert send_grades(url, monkeypatch) == "sent 1 scores, 0 failed (retried later)"
            assert send_grades(url, monkeypatch) == "sent 0 scores, 0 failed (retried later)"

            scores = lms.scores["/lineitems/1"]
            assert [(s["scoreGiven"], s["scoreMaximum"]) for s in scores] == [(1, 4), (2, 4)]
            assert scores[-1]["userId"] == "user-42" and scores[-1]["activityProgress"] == "InProgress"
            assert not page.errors, page.errors
            context.close()
        finally:
            tool.stop()
