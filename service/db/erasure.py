"""Erasure of a learner: everything about them deleted, their event ids kept as tombstones (hashed)
so a later replay is acknowledged, never stored again."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, select, text

from . import mistake_rollups
from .engine import Database
from .events import dialect_insert, tombstone
from .models import CheckpointProgress, ErasedEvent, Event, ExerciseChallenge, ExerciseCheck, LearnerLesson
from .rollup_refresh import forget_learner, forget_standing


def erase_learner(db: Database, platform_id: int, learner: str) -> dict[str, int] | None:
    """Delete everything about one learner of one platform; None when there was nothing."""
    with db.write() as session:
        forget_learner(session.connection(), platform_id, learner)
        mistake_rollups.forget(session.connection(), platform_id, learner)
        event_ids = list(
            session.scalars(select(Event.event_id).where(Event.platform_id == platform_id, Event.learner == learner))
        )
        progress = _count(
            session.execute(
                delete(CheckpointProgress).where(
                    CheckpointProgress.platform_id == platform_id, CheckpointProgress.learner == learner
                )
            )
        )
        checks = _count(
            session.execute(
                delete(ExerciseCheck).where(ExerciseCheck.platform_id == platform_id, ExerciseCheck.learner == learner)
            )
        )
        challenges = _count(
            session.execute(
                delete(ExerciseChallenge).where(
                    ExerciseChallenge.platform_id == platform_id, ExerciseChallenge.learner == learner
                )
            )
        )
        if not event_ids and not progress and not checks and not challenges:
            return None
        session.execute(delete(Event).where(Event.platform_id == platform_id, Event.learner == learner))
        session.execute(
            delete(LearnerLesson).where(LearnerLesson.platform_id == platform_id, LearnerLesson.learner == learner)
        )
        forget_standing(session.connection(), platform_id, learner)
        if event_ids and session.get_bind().dialect.name == "postgresql":  # ids claimed (migration 0007)
            session.execute(
                text("DELETE FROM event_ids WHERE platform_id = :p AND event_id = ANY(:ids)"),
                {"p": platform_id, "ids": event_ids},
            )
        if event_ids:
            stones = [{"platform_id": platform_id, "event_hash": tombstone(platform_id, i)} for i in event_ids]
            session.execute(
                dialect_insert(session.get_bind().dialect.name, ErasedEvent)
                .values(stones)
                .on_conflict_do_nothing(index_elements=["platform_id", "event_hash"])
            )
        return {"events": len(event_ids), "checkpoints": progress, "exercise_checks": checks}


def _count(result: Any) -> int:
    """Rows a DELETE removed (a CursorResult's rowcount)."""
    return int(result.rowcount)
