"""An instructor's course (LTI Names and Role Provisioning): when an instructor launched from their
course, the dashboard lists the course's learners, under the pseudonyms their progress is kept
by, with what each completed. The membership is read from the platform when the dashboard asks,
never stored; names and e-mail addresses in it are dropped on arrival. Fewer than k learners:
nothing but the count's absence (the dashboard's k-anonymity rule)."""

from __future__ import annotations

from typing import Any

import requests
from pylti1p3.names_roles import NamesRolesProvisioningService
from sqlalchemy import select

from ..db.engine import Database
from ..db.tables import CheckpointProgress
from .grades import connector_for
from .tool import PatientSession, pseudonym

NRPS = "https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice"
MEMBERSHIP = "http://purl.imsglobal.org/vocab/lis/v2/membership#"
TEACHING = {MEMBERSHIP + r for r in ("Instructor", "Administrator", "ContentDeveloper")} | {
    "http://purl.imsglobal.org/vocab/lis/v2/membership/Instructor#TeachingAssistant"
}
MAX_PAGES = 50  # a platform that pages forever is cut off here
LOOKUP = 500  # learners per progress query


def course_of(claims: dict[str, Any]) -> dict[str, Any] | None:
    """What the session keeps of a teaching launch that offers the membership service."""
    roles = set(claims.get("https://purl.imsglobal.org/spec/lti/claim/roles") or [])
    service = claims.get(NRPS) or {}
    if not roles & TEACHING or not service.get("context_memberships_url"):
        return None
    context = claims.get("https://purl.imsglobal.org/spec/lti/claim/context") or {}
    return {
        "memberships": service["context_memberships_url"],
        "title": context.get("title") or context.get("label") or "Your course",
    }


def learners(
    db: Database,
    registration_id: int,
    issuer: str,
    platform_id: int,
    course: dict[str, Any],
    k: int,
    http: requests.Session | None = None,
) -> dict[str, Any]:
    """The course's active learners and their completed checkpoints per lesson, or why not."""
    connector = connector_for(db, registration_id, http or PatientSession())
    service = NamesRolesProvisioningService(connector, {"context_memberships_url": course["memberships"]})
    members: list[Any] = []
    url, pages = course["memberships"], 0
    while url and pages < MAX_PAGES:
        page, url = service.get_members_page(url)
        members += page
        pages += 1
    ids = sorted({pseudonym(issuer, m["user_id"]) for m in members if _learner(m) and m.get("user_id")})
    if len(ids) < k:
        return {"course": course["title"], "learners": None, "hidden": f"fewer than {k} learners"}
    done: dict[str, dict[str, list[str]]] = {i: {} for i in ids}
    with db.read() as session:
        for start in range(0, len(ids), LOOKUP):
            rows = session.execute(
                select(CheckpointProgress.learner, CheckpointProgress.lesson, CheckpointProgress.checkpoint).where(
                    CheckpointProgress.platform_id == platform_id,
                    CheckpointProgress.learner.in_(ids[start : start + LOOKUP]),
                )
            )
            for learner, lesson, checkpoint in rows:
                done[learner].setdefault(lesson, []).append(checkpoint)
    listed = [{"learner": i, "completed": {s: sorted(c) for s, c in done[i].items()}} for i in ids]
    return {"course": course["title"], "learners": listed, "hidden": None}


def _learner(member: Any) -> bool:
    roles = member.get("roles") or []
    learning = any(r == "Learner" or r.endswith("#Learner") for r in roles)
    return learning and member.get("status", "Active") == "Active"
