"""Reads about one learner: progress per checkpoint, their events (keyset-paginated)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import exists, select
from sqlalchemy.orm import Session

from ..i18n import current
from ..lessons import Checkpoint, Lesson
from ..lessons.items import PHASES
from ..lessons.prediction import PREDICTIONS, judged
from .events import described
from .tables import CheckpointProgress, Event, ExerciseChallenge, ExerciseCheck, LearnerManipulation


def learner_exists(session: Session, platform_id: int, learner: str) -> bool:
    return bool(
        session.scalar(
            select(
                exists().where(Event.platform_id == platform_id, Event.learner == learner)
                | exists().where(CheckpointProgress.platform_id == platform_id, CheckpointProgress.learner == learner)
                | exists().where(ExerciseCheck.platform_id == platform_id, ExerciseCheck.learner == learner)
                | exists().where(ExerciseChallenge.platform_id == platform_id, ExerciseChallenge.learner == learner)
            )
        )
    )


def learner_progress(session: Session, platform_id: int, learner: str, lessons: list[Lesson]) -> list[dict[str, Any]]:
    done = {
        (r.lesson, r.checkpoint): r
        for r in session.scalars(
            select(CheckpointProgress).where(
                CheckpointProgress.platform_id == platform_id, CheckpointProgress.learner == learner
            )
        )
    }
    texts = latest_texts(session, platform_id, learner, lessons)
    manipulations = manipulations_done(session, platform_id, learner)
    answers = latest_answers(session, platform_id, learner)
    result = []
    for lesson in lessons:
        checkpoints = []
        for cp in lesson.checkpoints:
            row = done.get((lesson.id, cp.id))
            item = {
                "id": cp.id,
                "title": cp.title,
                "completed": row is not None,
                "completed_at": row.completed_at if row else None,
                "verification": row.verification if row else None,
                "response": texts.get((lesson.id, cp.id)),
            }
            if cp.manipulations:
                did = manipulations.get((lesson.id, cp.id), set())
                item["manipulations"] = [m for m in cp.manipulations if m in did]
            if cp.prediction:
                item["prediction"] = prediction_of(session, platform_id, learner, lesson, cp)
            checkpoints.append(item)
        completed = sum(bool(c["completed"]) for c in checkpoints)
        result.append(
            {
                "lesson": lesson.id,
                "title": lesson.title,
                "completed": completed,
                "total": len(checkpoints),
                "checkpoints": checkpoints,
                "items": answers_json(lesson, answers.get(lesson.id, {})),
            }
        )
    return result


def first_item_events(
    session: Session, platform_id: int, keys: list[tuple[str, str, str]]
) -> dict[tuple[str, str, str, str], dt.datetime]:
    """(learner, lesson, item, phase) -> when the learner first answered (or skipped) the item in
    that phase, for the (learner, lesson, item) keys given."""
    found: dict[tuple[str, str, str, str], dt.datetime] = {}
    items: dict[tuple[str, str], set[str]] = {}
    for learner, lesson, item in keys:
        items.setdefault((learner, lesson), set()).add(item)
    for (learner, lesson), asked in items.items():  # one query per learner and lesson
        rows = session.execute(
            select(Event.item, Event.data, Event.occurred_at).where(
                Event.platform_id == platform_id,
                Event.lesson == lesson,
                Event.learner == learner,
                Event.event.in_(("answered", "skipped")),
                Event.item.in_(sorted(asked)),
            )
        )
        for item, data, at in rows:
            key = (learner, lesson, item, data.get("phase"))
            at = at if at.tzinfo else at.replace(tzinfo=dt.UTC)
            found[key] = min(found.get(key, at), at)
    return found


Answers = dict[tuple[str, str], tuple[Any, bool, dt.datetime]]  # (item, phase) -> (response, correct, at)


def latest_answers(session: Session, platform_id: int, learner: str) -> dict[str, Answers]:
    """lesson -> the learner's latest answer to each (item, phase), with the score it was given; a
    question passed over before the workbench, with no answer since, as a skip (response None)."""
    rows = session.execute(
        select(Event.lesson, Event.item, Event.event, Event.data, Event.occurred_at)
        .where(Event.platform_id == platform_id, Event.learner == learner, Event.event.in_(("answered", "skipped")))
        .order_by(Event.occurred_at, Event.id)
    )
    found: dict[str, Answers] = {}
    for lesson, item, event, data, at in rows:
        said = found.setdefault(lesson, {})
        key = (item, data.get("phase"))
        if event == "answered" or key not in said:
            said[key] = (data.get("response") if event == "answered" else SKIPPED, bool(data.get("correct")), at)
    return found


SKIPPED = None  # the response of a question passed over


def answers_json(lesson: Lesson, answers: Answers) -> list[dict[str, Any]]:
    """Each item's latest answer per phase, in the lesson's order; its score, misconception and working
    (in the request's language) and the right answer only once the item is not asked again: a pre answer
    to an item asked after the workbench too is scored for the learner when the post one is."""
    shown = lesson.in_locale(current())
    out = []
    for item in lesson.items:
        for phase in PHASES:
            if (item.id, phase) not in answers:
                continue
            response, correct, at = answers[(item.id, phase)]
            entry: dict[str, Any] = {"item": item.id, "phase": phase, "response": response, "answered_at": at}
            if response is SKIPPED:
                entry["skipped"] = True
            elif not item.asked_again(phase) or (item.id, "post") in answers:
                words = shown.item(item.id) or item
                chosen = words.choice(response) if isinstance(response, str) else None
                misconception = chosen.misconception if chosen else None
                entry.update(correct=correct, misconception=misconception, answer=item.key(), working=words.working)
            out.append(entry)
    return out


def prediction_of(
    session: Session, platform_id: int, learner: str, lesson: Lesson, checkpoint: Checkpoint
) -> dict[str, Any]:
    """The learner's latest prediction at `checkpoint` and what the engine says of their own experiment."""
    check = PREDICTIONS[checkpoint.prediction or ""]
    choice = session.scalar(
        select(Event.data)
        .where(
            Event.platform_id == platform_id,
            Event.learner == learner,
            Event.lesson == lesson.id,
            Event.event == "completed",
            Event.checkpoint == checkpoint.id,
        )
        .order_by(Event.occurred_at.desc(), Event.id.desc())
        .limit(1)
    )
    done = session.scalar(
        select(Event.data)
        .join(LearnerManipulation, (LearnerManipulation.event_id == Event.event_id))
        .where(
            LearnerManipulation.platform_id == platform_id,
            LearnerManipulation.learner == learner,
            LearnerManipulation.lesson == lesson.id,
            LearnerManipulation.manipulation == check.manipulation,
            Event.platform_id == platform_id,
            Event.learner == learner,
        )
        .limit(1)
    )
    return judged((choice or {}).get("choice"), done)


def manipulations_done(session: Session, platform_id: int, learner: str) -> dict[tuple[str, str], set[str]]:
    """(lesson, checkpoint) -> the manipulations the learner has done towards it."""
    rows = session.execute(
        select(LearnerManipulation.lesson, LearnerManipulation.checkpoint, LearnerManipulation.manipulation).where(
            LearnerManipulation.platform_id == platform_id, LearnerManipulation.learner == learner
        )
    )
    done: dict[tuple[str, str], set[str]] = {}
    for lesson, checkpoint, manipulation in rows:
        done.setdefault((lesson, checkpoint), set()).add(manipulation)
    return done


def latest_texts(session: Session, platform_id: int, learner: str, lessons: list[Lesson]) -> dict[tuple[str, str], str]:
    """(lesson, checkpoint) -> the learner's latest recorded text, for checkpoints that carry text."""
    wanted = {(lesson.id, cp.id) for lesson in lessons for cp in lesson.checkpoints if cp.requires == "text"}
    if not wanted:
        return {}
    rows = session.execute(
        select(Event.lesson, Event.checkpoint, Event.data)
        .where(
            Event.platform_id == platform_id,
            Event.learner == learner,
            Event.lesson.in_({lesson for lesson, _ in wanted}),
            Event.event == "completed",
        )
        .order_by(Event.occurred_at, Event.id)
    )
    texts: dict[tuple[str, str], str] = {}
    for lesson, checkpoint, data in rows:
        if (lesson, checkpoint) in wanted and isinstance((data or {}).get("text"), str):
            texts[(lesson, checkpoint)] = data["text"]  # later rows win
    return texts


def learner_events(
    session: Session,
    platform_id: int,
    learner: str,
    after: int,
    limit: int,
    lesson: str | None = None,
    since: dt.datetime | None = None,
) -> list[Event]:
    """A learner's events in the order they were stored; in one `lesson`, stored `since` a time, when given."""
    query = select(Event).where(Event.platform_id == platform_id, Event.learner == learner, Event.id > after)
    if lesson is not None:
        query = query.where(Event.lesson == lesson, Event.stored_at >= since)
    return list(session.scalars(query.order_by(Event.id).limit(limit)))


def event_json(e: Event) -> dict[str, Any]:
    return {"id": e.event_id, **described(e), "occurred_at": e.occurred_at, "stored_at": e.stored_at}
