"""Statements Open edX Aspects reads as they are: a learner launched from a course gets statements
whose first parent activity is that course (the platform's context id), with one xAPI registration
for the learner in it; the actor is an account on the platform's home page; the lesson's language
rides in context.language; the same events give the same statements, every time; Ralph's models
accept them."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import select

from service.db.lti_tables import LtiLearnerCourse

from .lms_server import LmsServer
from .platform import CLAIM
from .test_grades import complete

pytestmark = pytest.mark.databases  # SQLite and PostgreSQL

X = {"X-Experience-API-Version": "1.0.3"}
COURSE = "course-v1:Attention+W3+2026"


def launch_from_course(client, lms_server: LmsServer, course: str = COURSE) -> str:
    platform = lms_server.platform
    params = platform.login(client)
    claims = platform.claims(
        params["nonce"],
        **lms_server.grades_claim(),
        **{CLAIM + "context": {"id": course, "title": "Attention, week 3"}},
    )
    assert platform.launch(client, params["state"], platform.id_token(claims)).status_code == 303
    return client.get("/api/v1/session").get_json()["learner"]


def statements(client, key) -> list[dict]:
    answer = client.get("/api/v1/xapi/statements", headers={**key, **X})
    assert answer.status_code == 200, answer.json
    return answer.json["statements"]


def test_a_launched_learners_statements_name_the_course_as_aspects_reads_it(client, lms_server, make_key):
    learner = launch_from_course(client, lms_server)
    complete(client, learner, "predict", "experiment")
    key = make_key("lms", "analytics:read")
    sent = statements(client, key)
    assert sent and all(s["actor"]["account"]["name"] == learner for s in sent)
    course_iri = lms_server.platform.issuer + "/course/course-v1%3AAttention%2BW3%2B2026"
    registrations = set()
    for s in sent:
        first = s["context"]["contextActivities"]["parent"][0]
        assert first["id"] == course_iri and first["definition"]["type"] == "http://adlnet.gov/expapi/activities/course"
        assert first["definition"]["name"] == {"en-US": COURSE}
        registrations.add(s["context"]["registration"])
        assert s["context"]["language"] == "en-US"
        assert s["actor"]["account"]["homePage"].startswith("http")
    (registration,) = registrations  # one registration for the learner in this course
    assert uuid.UUID(registration).version == 5
    assert statements(client, key) == sent  # re-sent: the same statements, the same ids
    models = pytest.importorskip("ralph.models.xapi.base.statements", reason="Ralph is installed by .ci/run")
    for s in sent:
        models.BaseXapiStatement(**s)


def test_a_learner_launched_without_a_course_keeps_the_lesson_as_the_only_parent(client, lms_server, make_key):
    platform = lms_server.platform
    params = platform.login(client)
    claims = platform.claims(params["nonce"], **lms_server.grades_claim())  # no context claim
    assert platform.launch(client, params["state"], platform.id_token(claims)).status_code == 303
    complete(client, client.get("/api/v1/session").get_json()["learner"], "predict")
    (s,) = statements(client, make_key("lms", "analytics:read"))
    assert [p["definition"]["type"] for p in s["context"]["contextActivities"]["parent"]] == [
        "http://adlnet.gov/expapi/activities/lesson"
    ]
    assert "registration" not in s["context"]


def test_erasing_the_learner_forgets_their_course(app, client, lms_server):
    learner = launch_from_course(client, lms_server)
    complete(client, learner, "predict")
    assert client.delete(f"/api/v1/learners/{learner}").status_code == 200
    with app.extensions["db"].read() as session:
        assert session.scalars(select(LtiLearnerCourse)).all() == []
