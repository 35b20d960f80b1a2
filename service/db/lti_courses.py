"""The course each launched learner opened a lesson from (LtiLearnerCourse): kept at the launch,
read by the xAPI statements of that lesson, erased with the learner."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterable
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from .events import dialect_insert
from .lti_tables import LtiLearnerCourse, LtiRegistration

# A learner's xAPI registration in a course (context.registration must be a UUID): the same for
# every statement of theirs in it, so re-sent statements are identical (uuid5 of fixed names).
REGISTRATIONS = uuid.UUID("5b0f2a3e-8d1c-4c5e-9a7b-6e2d1f0c3b4a")


def keep(session: Session, platform_id: int, learner: str, lesson: str, registration_id: int, course: str) -> None:
    """Record the course the learner opened `lesson` from (insert, or replace the one kept)."""
    dialect = session.get_bind().dialect.name
    row = {
        "platform_id": platform_id,
        "learner": learner,
        "lesson": lesson,
        "registration_id": registration_id,
        "course": course[:255],
        "updated_at": dt.datetime.now(dt.UTC),
    }
    statement = dialect_insert(dialect, LtiLearnerCourse).values(row)
    new = statement.excluded
    session.execute(
        statement.on_conflict_do_update(
            index_elements=["platform_id", "learner", "lesson"],
            set_={"registration_id": new.registration_id, "course": new.course, "updated_at": new.updated_at},
        )
    )


def of(session: Session, platform_id: int, rows: Iterable[Any]) -> dict[tuple[str, str], dict[str, str]]:
    """{(learner, lesson): {course, issuer, registration}} for the rows' learners launched into a course."""
    wanted = sorted({r.learner for r in rows})
    if not wanted:
        return {}
    found = session.execute(
        select(
            LtiLearnerCourse.learner,
            LtiLearnerCourse.lesson,
            LtiLearnerCourse.course,
            LtiRegistration.issuer,
            LtiRegistration.client_id,
        )
        .join(LtiRegistration, LtiRegistration.id == LtiLearnerCourse.registration_id)
        .where(LtiLearnerCourse.platform_id == platform_id, LtiLearnerCourse.learner.in_(wanted))
    )
    return {
        (learner, lesson): {
            "course": course,
            "issuer": issuer,
            "registration": str(uuid.uuid5(REGISTRATIONS, f"{issuer}\n{client}\n{course}\n{learner}")),
        }
        for learner, lesson, course, issuer, client in found
    }
