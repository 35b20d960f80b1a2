"""Exercise challenges and checks: issued, found, answered (one transaction per answer)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import update
from sqlalchemy.orm import Session

from ..lessons import Lesson
from .analytics.mistake_rollups import count_check
from .events import NewEvent, record_events_in
from .tables import ExerciseChallenge, ExerciseCheck


class ChallengeSolved(Exception):
    """The challenge was solved already (perhaps a moment ago, by a racing answer)."""


def add_challenge(session: Session, challenge: ExerciseChallenge) -> None:
    session.add(challenge)


def find_challenge(session: Session, challenge_id: str) -> ExerciseChallenge | None:
    """The challenge, detached from the session (its fields stay readable)."""
    challenge = session.get(ExerciseChallenge, challenge_id)
    if challenge is not None:
        session.expunge(challenge)
    return challenge


def add_check(
    session: Session,
    platform_id: int,
    learner: str | None,
    lesson: str,
    case: dict[str, Any],
    correct: bool,
    max_abs_error: float,
    mistakes: list[str],
    at: dt.datetime | None = None,
) -> None:
    session.add(
        ExerciseCheck(
            platform_id=platform_id,
            learner=learner,
            lesson=lesson,
            case=case,
            correct=correct,
            max_abs_error=max_abs_error,
            diagnosis=",".join(mistakes) or None,
            **({"created_at": at} if at else {}),
        )
    )
    count_check(session.connection(), platform_id, lesson, learner, mistakes)


def record_answer(
    session: Session,
    challenge: ExerciseChallenge,
    result: dict[str, Any],
    event: NewEvent,
    lessons: dict[str, Lesson],
) -> bool:
    """Count the attempt, keep each case's diagnosis and record the learner's event, in the
    caller's transaction; True when the event completed the checkpoint. Two answers racing to
    solve: the first wins, the second raises ChallengeSolved."""
    conn = session.connection()
    claimed = conn.execute(
        update(ExerciseChallenge)
        .where(ExerciseChallenge.id == challenge.id, ExerciseChallenge.solved_at.is_(None))
        .values(
            attempts=ExerciseChallenge.attempts + 1,
            last_result={k: v for k, v in result.items() if k != "completed"},
            solved_at=event.occurred_at if result["correct"] else None,
        )
    ).rowcount
    if not claimed:
        raise ChallengeSolved(challenge.id)
    for case, verdict in zip(challenge.cases, result["cases"], strict=True):
        add_check(
            session,
            challenge.platform_id,
            challenge.learner,
            challenge.lesson,
            {**case, "challenge": challenge.id},
            verdict["correct"],
            verdict["max_abs_error"],
            verdict["mistakes"],
            event.occurred_at,
        )
    session.flush()
    return bool(record_events_in(conn, challenge.platform_id, [event], lessons).completed)
