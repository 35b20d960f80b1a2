"""Progress events as xAPI 1.0.3 statements (this service is a Learning Record Provider).

statement id = event id; actor = an account {platform home page, learner id}; verbs from the
ADL vocabulary; object = the checkpoint (or lesson) as an activity IRI; the lesson is the
parent context; timestamps in UTC with milliseconds.
"""

from __future__ import annotations

import datetime as dt
from typing import Any
from urllib.parse import quote

from ..db import locales, lti_courses
from ..lessons import Checkpoint, Lesson
from .interactions import answered_object, answered_result

VERSION = "1.0.3"
ADL = "http://adlnet.gov/expapi/verbs/"
VERBS = {
    "answered": ADL + "answered",
    "responded": ADL + "responded",
    "interacted": ADL + "interacted",
    "attempted": ADL + "attempted",
    "passed": ADL + "passed",
    "failed": ADL + "failed",
    "skipped": "http://id.tincanapi.com/verb/skipped",  # the Tin Can registry's: ADL's list has none
}
ACTIVITY_TYPES = {
    "lesson": "http://adlnet.gov/expapi/activities/lesson",
    "course": "http://adlnet.gov/expapi/activities/course",
    "interaction": "http://adlnet.gov/expapi/activities/interaction",
    "assessment": "http://adlnet.gov/expapi/activities/assessment",
}
EXTENSION = "https://attention-workbench.example/xapi/extensions/"
# Language maps (RFC 5646 tags): each verb's display in every language the lessons are written in.
VERB_DISPLAY = {
    "answered": {"en-US": "answered", "es": "respondió", "zh-CN": "回答了"},
    "responded": {"en-US": "responded", "es": "contestó", "zh-CN": "作出了回应"},
    "interacted": {"en-US": "interacted", "es": "interactuó", "zh-CN": "进行了交互"},
    "attempted": {"en-US": "attempted", "es": "intentó", "zh-CN": "尝试了"},
    "passed": {"en-US": "passed", "es": "aprobó", "zh-CN": "通过了"},
    "failed": {"en-US": "failed", "es": "no aprobó", "zh-CN": "未通过"},
    "skipped": {"en-US": "skipped", "es": "omitió", "zh-CN": "跳过了"},
}


def language_map(titles: dict[str, str]) -> dict[str, str]:
    """{locale: text} as an xAPI language map: English as en-US, as the statements always said."""
    return {("en-US" if locale == "en" else locale): text for locale, text in titles.items()}


def verb_for(event: str, checkpoint: str | None, data: dict[str, Any], requires: str | None) -> str:
    if event in ("answered", "skipped"):
        return event
    if event == "parameter-changed":
        return "interacted"
    if event == "completed":
        if requires == "passing-tests":
            return "passed"
        return "answered" if checkpoint == "predict" else "responded"
    if event == "attempted" and isinstance(data.get("tests"), dict) and data["tests"].get("failed"):
        return "failed"
    if event == "attempted" and data.get("verification") == "verified":
        return "failed"  # the server's check found a mistake
    return "attempted"


def timestamp(value: dt.datetime) -> str:
    return value.astimezone(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def activity_id(base: str, lesson: str, checkpoint: str | None = None) -> str:
    lesson_iri = f"{base.rstrip('/')}/lessons/{lesson}"
    return f"{lesson_iri}/checkpoints/{checkpoint}" if checkpoint else lesson_iri


def statements_of(
    session: Any, platform_id: int, rows: list[Any], home_page: str, base: str, lessons: dict[str, Lesson]
) -> list[dict[str, Any]]:
    """The statements of a platform's event `rows`, each with its learner's language and course."""
    languages = locales.of(session, platform_id, (r.learner for r in rows))
    courses = lti_courses.of(session, platform_id, rows)
    return [
        statement(r, home_page, base, lessons, languages.get(r.learner), courses.get((r.learner, r.lesson)))
        for r in rows
    ]


def statement(
    row: Any,
    home_page: str,
    base: str,
    lessons: dict[str, Lesson],
    locale: str | None = None,
    course: dict[str, str] | None = None,
) -> dict[str, Any]:
    """`row` has event_id, learner, lesson, checkpoint, event, instance_id, data, occurred_at;
    `locale`: the language the learner reads the service in, when known (service/db/locales.py);
    `course`: the LTI course the learner opened the lesson from (service/db/lti_courses.py), which
    becomes the first parent activity, with the learner's registration in it (as Open edX Aspects reads them)."""
    lesson = lessons.get(row.lesson)
    checkpoint = lesson.checkpoint(row.checkpoint) if (lesson and row.checkpoint) else None
    data = row.data or {}
    verb = verb_for(row.event, row.checkpoint, data, checkpoint.requires if checkpoint else None)
    answer = row.event in ("answered", "skipped") and getattr(row, "item", None)
    body = {
        "id": row.event_id,
        "actor": {"objectType": "Agent", "account": {"homePage": home_page, "name": row.learner}},
        "verb": {"id": VERBS[verb], "display": VERB_DISPLAY[verb]},
        "object": answered_object(lesson, row, base) if answer else _target(row, lesson, checkpoint, base),
        "context": _context(row, base, locale, course),
        "timestamp": timestamp(row.occurred_at),
        "version": VERSION,
    }
    result = _result(row.event, data, checkpoint)
    if answer:
        skipped = {"extensions": {EXTENSION + "phase": "pre"}}
        result = answered_result(data, EXTENSION) if row.event == "answered" else skipped
    if result:
        body["result"] = result
    return body


def _target(row: Any, lesson: Lesson | None, checkpoint: Checkpoint | None, base: str) -> dict[str, Any]:
    tested = checkpoint is not None and checkpoint.requires == "passing-tests"
    kind = "assessment" if tested and row.event != "parameter-changed" else "interaction"
    return {
        "objectType": "Activity",
        "id": activity_id(base, row.lesson, row.checkpoint),
        "definition": {
            "name": language_map(lesson.titles(row.checkpoint if checkpoint else None))
            if lesson
            else {"en-US": row.lesson},
            "type": ACTIVITY_TYPES[kind] if row.checkpoint else ACTIVITY_TYPES["lesson"],
        },
    }


def _result(event: str, data: dict[str, Any], checkpoint: Checkpoint | None) -> dict[str, Any]:
    result: dict[str, Any] = {}
    if isinstance(data.get("text"), str):
        result["response"] = data["text"][:4096]
    tests = data.get("tests")
    if isinstance(tests, dict) and isinstance(tests.get("passed"), int) and isinstance(tests.get("failed"), int):
        total = tests["passed"] + tests["failed"]
        result["success"] = tests["failed"] == 0 and tests["passed"] > 0
        result["completion"] = event == "completed"
        if total:
            result["score"] = {
                "raw": tests["passed"],
                "min": 0,
                "max": total,
                "scaled": round(tests["passed"] / total, 4),
            }
    elif event == "completed":
        result["completion"] = True
    tested = checkpoint is not None and checkpoint.requires == "passing-tests"
    if tested and data.get("verification") == "verified":
        result["success"] = result["completion"] = event == "completed"
    extensions = {EXTENSION + k: v for k, v in data.items() if k not in ("text", "tests")}
    if tested:
        # verified: the server checked the learner's numbers on fresh cases; reported: a platform said so.
        extensions[EXTENSION + "verification"] = "verified" if data.get("verification") == "verified" else "reported"
    if extensions:
        result["extensions"] = extensions
    return result


def _context(row: Any, base: str, locale: str | None, course: dict[str, str] | None) -> dict[str, Any]:
    language = "en-US" if locale in (None, "en") else locale  # RFC 5646, as the language maps spell it
    context: dict[str, Any] = {"platform": "attention-workbench", "language": language}
    parents = []
    if course:
        context["registration"] = course["registration"]
        course_id = f"{course['issuer'].rstrip('/')}/course/{quote(course['course'], safe='')}"
        named = {"type": ACTIVITY_TYPES["course"], "name": {"en-US": course["course"]}}
        parents.append({"objectType": "Activity", "id": course_id, "definition": named})
    if row.checkpoint or getattr(row, "item", None):
        parents.append(
            {
                "objectType": "Activity",
                "id": activity_id(base, row.lesson),
                "definition": {"type": ACTIVITY_TYPES["lesson"]},
            }
        )
    if parents:
        context["contextActivities"] = {"parent": parents}
    if row.instance_id:
        context["extensions"] = {EXTENSION + "instance_id": row.instance_id}
    return context
