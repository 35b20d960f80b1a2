"""Names and roles: an instructor launched from their course sees its learners in the dashboard,
under pseudonyms, with what each completed; the membership's names never leave the platform's
answer, and a course of fewer than k learners shows none."""

from __future__ import annotations

import html

import pytest

from service.lti.tool import pseudonym
from tests.api.helpers import completed

from .lms_server import LmsServer

pytestmark = pytest.mark.databases  # SQLite and PostgreSQL

LEARNER = "http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"
INSTRUCTOR = "http://purl.imsglobal.org/vocab/lis/v2/membership#Instructor"


def member(sub: str, role: str = LEARNER, status: str = "Active") -> dict:
    return {"user_id": sub, "roles": [role], "status": status, "name": f"Name of {sub}", "email": f"{sub}@example.edu"}


def launch(client, lms_server: LmsServer, sub: str, target: str = "/lessons/multi-head-attention", teaching=False):
    params = lms_server.platform.login(client, target)
    extra = lms_server.teaching_claims() if teaching else {}
    claims = lms_server.platform.claims(params["nonce"], target, sub=sub, **extra)
    return lms_server.platform.launch(client, params["state"], lms_server.platform.id_token(claims))


def test_the_instructor_sees_the_courses_learners_and_their_progress_under_pseudonyms(app, client, lms_server):
    subs = [f"student-{i}" for i in range(5)]
    lms_server.members = [member(s) for s in subs] + [
        member("teacher-1", INSTRUCTOR),
        member("gone", status="Inactive"),
    ]
    learner_browser = app.test_client()
    assert launch(learner_browser, lms_server, "student-0").status_code == 303
    body = completed("predict", pseudonym(lms_server.platform.issuer, "student-0"))
    assert learner_browser.post("/api/v1/events", json=body).status_code == 201

    response = launch(client, lms_server, "teacher-1", "/dashboard", teaching=True)
    assert response.status_code == 303 and response.headers["Location"] == "/dashboard"
    course = client.get("/lti/course").get_json()
    assert course["course"] == "Attention, week 3" and course["hidden"] is None
    rows = {row["learner"]: row["completed"] for row in course["learners"]}
    assert set(rows) == {pseudonym(lms_server.platform.issuer, s) for s in subs}  # learners only, active only
    assert rows[pseudonym(lms_server.platform.issuer, "student-0")] == {"multi-head-attention": ["predict"]}
    text = client.get("/lti/course").get_data(as_text=True)
    assert "Name of" not in text and "@example.edu" not in text and "student-" not in text


def test_a_course_of_fewer_than_k_learners_shows_none(client, lms_server):
    lms_server.members = [member(f"student-{i}") for i in range(4)]
    launch(client, lms_server, "teacher-1", "/dashboard", teaching=True)
    course = client.get("/lti/course").get_json()
    assert course["learners"] is None and course["hidden"] == "fewer than 5 learners"


def test_a_learner_sees_no_course_and_cannot_open_the_dashboard_by_launch(client, lms_server):
    launch(client, lms_server, "student-0")
    refused = client.get("/lti/course")
    assert refused.status_code == 403 and refused.mimetype == "application/problem+json"
    dashboard = launch(client, lms_server, "student-0", "/dashboard")
    assert dashboard.status_code == 400 and "for a course's instructors" in html.unescape(
        dashboard.get_data(as_text=True)
    )


def test_a_platform_that_does_not_answer_is_a_clear_error(client, lms_server):
    launch(client, lms_server, "teacher-1", "/dashboard", teaching=True)
    lms_server.refuse = 1
    failed = client.get("/lti/course")
    assert failed.status_code == 502 and "did not give its members" in failed.get_json()["detail"]
