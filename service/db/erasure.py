"""Erasure of a learner: everything about them deleted, their event ids kept as tombstones (hashed)
so a later replay is acknowledged, never stored again."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, select, text
from sqlalchemy.orm import Session

from . import quotas
from .analytics import mistake_rollups
from .analytics.rollup_refresh import forget_learner, forget_standing
from .engine import Database
from .events import dialect_insert, tombstone
from .lti_tables import LtiGradeLink
from .tables import (
    AnalyticsErasure,
    CheckpointProgress,
    ErasedEvent,
    Event,
    ExerciseChallenge,
    ExerciseCheck,
    LearnerLesson,
    LearnerLocale,
    LearnerManipulation,
)


def erase_learner(db: Database, platform_id: int, learner: str, analytics: bool = False) -> dict[str, int] | None:
    """Delete everything about one learner of one platform; None when there was nothing. With
    `analytics` (a store is configured), the learner is queued for the sync to erase there too,
    in the same transaction."""
    with db.write() as session:
        if analytics:
            session.add(AnalyticsErasure(platform_id=platform_id, learner=learner))
        forget_learner(session.connection(), platform_id, learner)
        mistake_rollups.forget(session.connection(), platform_id, learner)
        quotas.forget_learner(session.connection(), platform_id, learner)
        event_ids = list(
            session.scalars(select(Event.event_id).where(Event.platform_id == platform_id, Event.learner == learner))
        )
        progress, checks, challenges, grade_links = (
            _delete_of(session, model, platform_id, learner)
            for model in (CheckpointProgress, ExerciseCheck, ExerciseChallenge, LtiGradeLink)
        )
        _delete_of(session, LearnerLocale, platform_id, learner)  # even for a learner who wrote nothing
        if not event_ids and not progress and not checks and not challenges and not grade_links:
            return None
        _delete_of(session, Event, platform_id, learner)
        _delete_of(session, LearnerLesson, platform_id, learner)
        _delete_of(session, LearnerManipulation, platform_id, learner)
        forget_standing(session.connection(), platform_id, learner)
        _tombstones(session, platform_id, event_ids)
        return {"events": len(event_ids), "checkpoints": progress, "exercise_checks": checks}


def _delete_of(session: Session, model: Any, platform_id: int, learner: str) -> int:
    """Delete the learner's rows of `model`; how many there were."""
    gone: Any = session.execute(delete(model).where(model.platform_id == platform_id, model.learner == learner))
    return int(gone.rowcount)


def _tombstones(session: Session, platform_id: int, event_ids: list[str]) -> None:
    """Keep the erased events' ids as hashes, so a replay is acknowledged and not stored again
    (on PostgreSQL the ids are also unclaimed in `event_ids`, migration 0007)."""
    if not event_ids:
        return
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        session.execute(
            text("DELETE FROM event_ids WHERE platform_id = :p AND event_id = ANY(:ids)"),
            {"p": platform_id, "ids": event_ids},
        )
    stones = [{"platform_id": platform_id, "event_hash": tombstone(platform_id, i)} for i in event_ids]
    session.execute(
        dialect_insert(dialect, ErasedEvent)
        .values(stones)
        .on_conflict_do_nothing(index_elements=["platform_id", "event_hash"])
    )
