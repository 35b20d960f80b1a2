"""Grades back to the platform (LTI Assignment and Grade Services): a launched learner's score for
a lesson is the checkpoints they completed out of the lesson's total, posted to their launch's
line item in the background, never while the learner waits.

The outbox is the database itself: every grade link whose learner now has another count of
completed checkpoints than the score the platform last accepted (`sent`). A pass sends each
once, records what was accepted, and backs off on failure as the xAPI forwarder does, so a
restart loses nothing and a score is sent once per change (twice only if the process dies
between the platform's answer and the commit; scores are "latest wins", so that is harmless).
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Final

import requests
from pylti1p3.assignments_grades import AssignmentsGradesService
from pylti1p3.exception import LtiException
from pylti1p3.grade import Grade
from pylti1p3.service_connector import ServiceConnector
from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from ..db.engine import Database
from ..db.lti_tables import LtiGradeLink, LtiRegistration
from ..db.tables import CheckpointProgress
from ..lessons import Lesson
from ..xapi.forward import backoff
from . import keys
from .tool import PatientSession, ToolRegistration

SCORE_SCOPE: Final = "https://purl.imsglobal.org/spec/lti-ags/scope/score"


def link(session: Session, registration_id: int, platform_id: int, learner: str, lesson: str, claims: dict) -> None:
    """At a launch that offers a line item and lets us post scores: where this learner's score goes."""
    endpoint = claims.get("https://purl.imsglobal.org/spec/lti-ags/claim/endpoint") or {}
    if not endpoint.get("lineitem") or SCORE_SCOPE not in endpoint.get("scope", []):
        return
    found = session.scalar(
        select(LtiGradeLink).where(
            LtiGradeLink.registration_id == registration_id,
            LtiGradeLink.lineitem == endpoint["lineitem"],
            LtiGradeLink.learner == learner,
        )
    )
    if found is None:
        found = LtiGradeLink(
            registration_id=registration_id,
            platform_id=platform_id,
            learner=learner,
            lesson=lesson,
            lineitem=endpoint["lineitem"],
            failures=0,
        )
        session.add(found)
    found.user_id = claims["sub"]


def waiting(session: Session, now: dt.datetime) -> list[tuple[LtiGradeLink, int]]:
    """The links whose score changed since the platform last accepted one, and are due."""
    progress = CheckpointProgress
    done = (
        select(func.count())
        .where(
            progress.platform_id == LtiGradeLink.platform_id,
            progress.learner == LtiGradeLink.learner,
            progress.lesson == LtiGradeLink.lesson,
        )
        .scalar_subquery()
    )
    due = or_(LtiGradeLink.next_attempt_at.is_(None), LtiGradeLink.next_attempt_at <= now)
    changed = done != func.coalesce(LtiGradeLink.sent, 0)  # in the database: unchanged links never leave it
    rows = session.execute(select(LtiGradeLink, done).where(due, changed).order_by(LtiGradeLink.id)).all()
    return [(row, n) for row, n in rows]


def grade(completed: int, total: int, user_id: str, now: dt.datetime) -> Grade:
    """The score: checkpoints done of all; the activity is completed when all are, and each score
    is final for the work it counts (auto-graded), so gradebooks show it at once."""
    return (
        Grade()
        .set_score_given(completed)
        .set_score_maximum(total)
        .set_user_id(user_id)
        .set_timestamp(now.astimezone(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"))
        .set_activity_progress("Completed" if completed >= total else "InProgress")
        .set_grading_progress("FullyGraded")
    )


def send_once(
    db: Database, lessons: dict[str, Lesson], now: dt.datetime | None = None, http: requests.Session | None = None
) -> dict[str, int]:
    """One pass over the outbox: how many scores were accepted, how many failed. Each score is
    posted outside any transaction (a slow platform holds no lock), then its outcome recorded."""
    now = now or dt.datetime.now(dt.UTC)
    http = http or PatientSession()
    with db.read() as session:
        batch = [(row, n) for row, n in waiting(session, now)]
    connectors: dict[int, ServiceConnector] = {}
    report = {"sent": 0, "failed": 0}
    for link, completed in batch:
        error = None
        try:
            if link.lesson not in lessons:
                raise LtiException(f"the lesson {link.lesson!r} is no longer served")
            connector = connectors.get(link.registration_id) or connector_for(db, link.registration_id, http)
            connectors[link.registration_id] = connector
            _post(connector, link, grade(completed, len(lessons[link.lesson].checkpoints), link.user_id, now))
        except (LtiException, requests.RequestException) as e:
            error = f"{e.__class__.__name__}: {e}"[:1024]
        with db.write() as session:
            row = session.get(LtiGradeLink, link.id)
            if row is None:  # erased meanwhile
                continue
            if error is None:
                row.sent, row.failures, row.next_attempt_at, row.last_error = completed, 0, None, None
            else:
                row.failures += 1
                row.next_attempt_at = now + dt.timedelta(seconds=backoff(row.failures))
                row.last_error = error
        report["failed" if error else "sent"] += 1
    return report


class PassConnector(ServiceConnector):
    """Keeps its access tokens for one pass (the library's Flask connector shares them process-wide
    by issuer, across registrations and token endpoints)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._tokens: dict[str, tuple[str, float]] = {}

    def _get_cached_access_token(self, scope_key: str) -> str | None:
        token, until = self._tokens.get(scope_key, ("", 0.0))
        return token if until > time.monotonic() else None

    def _cache_access_token(self, scope_key: str, access_token: str, expires_in: float) -> None:
        self._tokens[scope_key] = (access_token, time.monotonic() + expires_in - 30)


def connector_for(db: Database, registration_id: int, http: requests.Session) -> ServiceConnector:
    """A connector to the registration's platform services, signing with the tool's key."""
    with db.read() as session:
        registration = session.get(LtiRegistration, registration_id)
        if registration is None:
            raise LtiException(f"registration {registration_id} is gone")
        return PassConnector(ToolRegistration(registration, keys.signing(db)), requests_session=http)


def _post(connector: ServiceConnector, row: LtiGradeLink, score: Grade) -> None:
    service = AssignmentsGradesService(connector, {"lineitem": row.lineitem, "scope": [SCORE_SCOPE]})
    service.put_grade(score)
