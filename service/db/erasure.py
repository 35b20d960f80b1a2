"""Erasure of a learner: everything about them deleted, their event ids kept as tombstones (hashed)
so a later replay is acknowledged, never stored again."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import delete, select, text
from sqlalchemy.orm import Session

from . import quotas
from . import sessions as sessions_db
from .analytics import mistake_rollups
from .analytics.rollup_refresh import forget_learner, forget_standing
from .engine import Database
from .events import dialect_insert, tombstone
from .lti_tables import LtiGradeLink, LtiLearnerCourse
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
        _delete_of(session, LtiLearnerCourse, platform_id, learner)
        if not event_ids and not progress and not checks and not challenges and not grade_links:
            return None
        _delete_of(session, Event, platform_id, learner)
        _delete_of(session, LearnerLesson, platform_id, learner)
        _delete_of(session, LearnerManipulation, platform_id, learner)
        forget_standing(session.connection(), platform_id, learner)
        _tombstones(session, platform_id, event_ids)
        return {"events": len(event_ids), "checkpoints": progress, "exercise_checks": checks}


def erase_everywhere(
    db: Database, store: Any, cache: Any, lifetime: dt.timedelta, platform_id: int, learner: str, sessions: bool = True
) -> dict[str, int] | None:
    """Everything stored about the learner, gone: in the database (and queued for the analytics
    `store`), in the answers it keeps in memory, and every browser session of theirs refused for the
    sessions' `lifetime` (the sessions' `cache` told at once: their cookie writes nothing more under
    the erased id; a new visit starts a new learner). What was erased; None when nothing was stored
    (then sessions are refused only if `sessions`). What `DELETE /learners/{id}` and an LTI
    platform's deletion notice do."""
    erased = erase_learner(db, platform_id, learner, analytics=store.queues_erasures)
    store.forget(platform_id, learner)
    if erased is None and not sessions:
        return None
    mark = sessions_db.learner_mark(platform_id, learner)
    with db.write() as session:
        sessions_db.revoke(session, mark, dt.datetime.now(dt.UTC) + lifetime)
    cache.put(mark, True, seconds=lifetime.total_seconds())
    return erased


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
