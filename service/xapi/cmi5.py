"""cmi5 (AICC's xAPI profile for packaged courses, docs/cmi5.md): the course structure a package
declares, the launch a unit is opened with, and the statements the unit sends to the LMS's store.

A lesson is an assignable unit (AU). The LMS opens its page with five parameters; the page fetches
the token, reads the launch data and sends what is built here, in the cmi5 order: `initialized`,
the learner's own progress as "allowed" statements, `completed` once every checkpoint is earned,
`passed` or `failed` once every after-item is answered, `terminated` last. Ids are uuid5 of fixed
names, so a statement sent again is the same statement (the store answers 204 or 409, never a copy).
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit
from xml.sax.saxutils import escape, quoteattr

from ..i18n import translate
from ..lessons import Lesson
from ..observability import security_header_values
from ..text import N_
from .statements import VERB_DISPLAY, VERSION, language_map, statement, timestamp
from .statements import VERBS as ADL_VERBS

STRUCTURE = "https://w3id.org/xapi/profiles/cmi5/v1/CourseStructure.xsd"
CMI5 = "https://w3id.org/xapi/cmi5/context/"
CATEGORY = {"cmi5": CMI5 + "categories/cmi5", "moveon": CMI5 + "categories/moveon"}
SESSION_ID = CMI5 + "extensions/sessionid"
MASTERY_SCORE = CMI5 + "extensions/masteryscore"
MOVE_ON = ("CompletedAndPassed", "Completed", "Passed", "CompletedOrPassed", "NotApplicable")
LAUNCH_MODES = ("Normal", "Browse", "Review")
PARAMETERS = ("endpoint", "fetch", "actor", "registration", "activityId")
DEFAULT_MASTERY = 0.8  # the package's, and the unit's when the launch data names none
VERBS = {
    "initialized": "http://adlnet.gov/expapi/verbs/initialized",
    "completed": "http://adlnet.gov/expapi/verbs/completed",
    "passed": "http://adlnet.gov/expapi/verbs/passed",
    "failed": "http://adlnet.gov/expapi/verbs/failed",
    "terminated": "http://adlnet.gov/expapi/verbs/terminated",
}
ATTEMPTED = ADL_VERBS["attempted"]
IDS = uuid.UUID("0e5c3f7a-2b6d-4c1e-9a8f-5d4b3c2a1f60")  # uuid5 names: "<registration>/<what>"
NOT_SENT = ("parameter-changed",)  # what a learner moves in an explorable stays in the service's own record


def course_structure(lessons: list[Lesson], base: str, site: str, move_on: str, mastery: float | None) -> str:
    """The package's `cmi5.xml`: one course, one AU per lesson (its id the lesson's activity IRI under
    `base`, its page under `site`), titles and descriptions in every language each lesson is written
    in, launched in its own window."""
    base, site = base.rstrip("/"), site.rstrip("/")
    units = []
    for lesson in sorted(lessons, key=lambda one: one.order):
        scored = any(item.asked_in("post") for item in lesson.items)
        # a lesson without after-items cannot be passed: the LMS waits for its completion only
        moves = move_on if scored or move_on not in ("CompletedAndPassed", "Passed") else "Completed"
        attributes = f'moveOn="{moves}"' + (f' masteryScore="{mastery:g}"' if scored and mastery is not None else "")
        units.append(
            f'  <au id={quoteattr(f"{base}/lessons/{lesson.id}")} {attributes} launchMethod="OwnWindow">\n'
            f"    <title>{_strings(lesson, lambda written: written.title)}</title>\n"
            f"    <description>{_strings(lesson, lambda written: written.summary)}</description>\n"
            f"    <url>{escape(f'{site}/lessons/{lesson.id}')}</url>\n  </au>"
        )
    course = f"  <course id={quoteattr(f'{base}/cmi5/course')}>\n    <title>{_said(COURSE[0])}</title>\n"
    course += f"    <description>{_said(COURSE[1])}</description>\n  </course>"
    body = "\n".join([course, *units])
    return (
        f'<?xml version="1.0" encoding="utf-8"?>\n<courseStructure xmlns="{STRUCTURE}">\n{body}\n</courseStructure>\n'
    )


COURSE = (
    N_("Multi-head attention, from the formula to the trained model"),
    N_("Lessons with live explorables, an exercise to implement and scored questions, one assignable unit each."),
)


def _said(msgid: str) -> str:
    return "".join(
        f"<langstring lang={quoteattr(tag)}>{escape(translate(msgid, locale))}</langstring>" for locale, tag in TAGS
    )


TAGS = (("en", "en-US"), ("es", "es"), ("zh-CN", "zh-CN"))


def _strings(lesson: Lesson, pick) -> str:
    written = {one.locale: pick(one) for one in (lesson, *lesson.translations.values())}
    return "".join(
        f"<langstring lang={quoteattr(tag)}>{escape(text)}</langstring>" for tag, text in language_map(written).items()
    )


def launch_problems(args: Any) -> dict[str, str] | None:
    """None when the request is no cmi5 launch (none of the five parameters); else what is wrong with
    each of them, by name (empty: a launch the page may start). `args` is a MultiDict."""
    if not any(name in args for name in PARAMETERS):
        return None
    problems = {}
    for name in PARAMETERS:
        values = args.getlist(name)
        if not values or not values[0]:
            problems[name] = N_("is missing")
        elif len(values) > 1:
            problems[name] = N_("is given more than once")
        elif why := CHECKS[name](values[0]):
            problems[name] = why
    return problems


def _url(value: str) -> str | None:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.username or parts.password:
        return N_("must be an absolute http(s) URL without credentials")
    return None


def _iri(value: str) -> str | None:
    parts = urlsplit(value)
    return None if parts.scheme and (parts.netloc or parts.path) and len(value) <= 2048 else N_("must be an IRI")


def _uuid(value: str) -> str | None:
    try:
        uuid.UUID(value)
    except ValueError:
        return N_("must be a UUID")
    return None


def _actor(value: str) -> str | None:
    return None if agent_of(value) else N_("must be an xAPI Agent in JSON with an account (homePage and name)")


def agent_of(value: Any) -> dict[str, Any] | None:
    """The launch's actor (JSON text or an object) as the Agent every statement names, or None."""
    try:
        agent = json.loads(value) if isinstance(value, str) else value
    except ValueError:
        return None
    account = agent.get("account") if isinstance(agent, dict) else None
    if not isinstance(account, dict) or agent.get("objectType", "Agent") != "Agent":
        return None
    home, name = account.get("homePage"), account.get("name")
    if not (isinstance(home, str) and isinstance(name, str) and name and not _iri(home)):
        return None
    return {"objectType": "Agent", "account": {"homePage": home, "name": name}}


def launch_policy(args: Any) -> str:
    """The launched page's security policy: the service's, with the LMS's two origins added where the page
    may connect (its fetch URL's, for the token, and its record store's); nowhere else."""
    from flask import current_app

    origins = sorted({"{0.scheme}://{0.netloc}".format(urlsplit(args[name])) for name in ("fetch", "endpoint")})
    policy = dict(security_header_values(current_app.extensions["settings"]))["Content-Security-Policy"]
    return policy.replace("connect-src 'self'", " ".join(["connect-src 'self'", *origins]))


CHECKS = {"endpoint": _url, "fetch": _url, "actor": _actor, "registration": _uuid, "activityId": _iri}


@dataclass(frozen=True)
class Launch:
    """What one session of a unit was launched with (the parameters and the LMS's launch data)."""

    actor: dict[str, Any]
    registration: str
    activity_id: str
    session: str  # the session id the context template carries
    context_template: dict[str, Any]
    launch_mode: str  # Normal, Browse or Review
    mastery: float | None  # the launch data's masteryScore
    move_on: str
    started: dt.datetime  # the initialized statement's time

    def id(self, what: str) -> str:
        return str(uuid.uuid5(IDS, f"{self.registration}/{self.activity_id}/{what}"))


def unit_statements(
    launch: Launch, lesson: Lesson, progress: dict[str, Any], rows: list[Any], base: str
) -> list[dict[str, Any]]:
    """The statements due so far in this session, in the order they are sent. `progress`: the learner's
    progress in `lesson` (service/db/progress.py); `rows`: their events since `launch.started`."""
    due = [_defined(launch, "initialized", launch.started, id=launch.id(f"{launch.session}/initialized"))]
    home = launch.actor["account"]["homePage"]
    due += [
        allowed(launch, statement(row, home, base, {lesson.id: lesson})) for row in rows if row.event not in NOT_SENT
    ]
    if launch.launch_mode != "Normal":
        return due  # Browse and Review: the learner looks, nothing is judged
    checkpoints = progress["checkpoints"]
    if checkpoints and all(c["completed"] for c in checkpoints):
        at = max(c["completed_at"] for c in checkpoints)
        due.append(_defined(launch, "completed", at, {"completion": True}, id=launch.id("completed")))
    judged = _judged(launch, lesson, progress["items"])
    if judged:
        due.append(judged)
    return due


def _judged(launch: Launch, lesson: Lesson, answers: list[dict[str, Any]]) -> dict[str, Any] | None:
    """passed or failed, once every after-item has an answer: the share answered right against the mastery score."""
    asked = [item.id for item in lesson.items if item.asked_in("post")]
    after = {a["item"]: a for a in answers if a["phase"] == "post" and not a.get("skipped")}
    if not asked or any(item not in after for item in asked):
        return None
    right = sum(bool(after[item].get("correct")) for item in asked)
    scaled = round(right / len(asked), 4)
    mastery = DEFAULT_MASTERY if launch.mastery is None else launch.mastery
    verb = "passed" if scaled >= mastery else "failed"
    score = {"scaled": scaled, "raw": right, "min": 0, "max": len(asked)}
    at = max(after[item]["answered_at"] for item in asked)
    made = _defined(launch, verb, at, {"score": score, "success": verb == "passed"}, id=launch.id("judged"))
    made["context"].setdefault("extensions", {})[MASTERY_SCORE] = mastery
    return made


def terminated(launch: Launch, at: dt.datetime) -> dict[str, Any]:
    """The session's last statement (the page stamps its own time and duration when it leaves)."""
    return _defined(launch, "terminated", at, id=launch.id(f"{launch.session}/terminated"))


def _defined(
    launch: Launch, verb: str, at: dt.datetime, result: dict[str, Any] | None = None, *, id: str
) -> dict[str, Any]:
    """A cmi5 defined statement: the launch's activity as object, the context template, the cmi5
    category (and moveon for completed, passed and failed), a duration where cmi5 asks one."""
    categories = ["cmi5"] + ["moveon"] * (verb in ("completed", "passed", "failed"))
    context = _context(launch, [{"id": CATEGORY[name]} for name in categories])
    body = {
        "id": id,
        "actor": launch.actor,
        "verb": {"id": VERBS[verb], "display": {"en-US": verb}},
        "object": {"objectType": "Activity", "id": launch.activity_id},
        "context": context,
        "timestamp": timestamp(at),
        "version": VERSION,
    }
    if verb in ("completed", "passed", "failed", "terminated"):
        body["result"] = {**(result or {}), "duration": duration(at - launch.started)}
    return body


def allowed(launch: Launch, made: dict[str, Any]) -> dict[str, Any]:
    """One of the project's statements as a cmi5 allowed statement: the launch's actor and context
    template (without the cmi5 category), the launch's activity as a parent, a uuid5 of the
    registration and the event as its id."""
    own, template = made["context"], _context(launch, [])
    context = {**own, **template, "extensions": {**own.get("extensions", {}), **template["extensions"]}}
    activities = context["contextActivities"] = template.get("contextActivities", {})
    unit = {"objectType": "Activity", "id": launch.activity_id}
    activities["parent"] = [*activities.get("parent", []), unit, *own.get("contextActivities", {}).get("parent", [])]
    verb = made["verb"]
    if (
        verb["id"] in VERBS.values()
    ):  # cmi5's verbs are for the unit's own statements: a checkpoint's test run was attempted
        verb = {"id": ATTEMPTED, "display": VERB_DISPLAY["attempted"]}
    return {**made, "id": launch.id(f"event/{made['id']}"), "actor": launch.actor, "verb": verb, "context": context}


def _context(launch: Launch, categories: list[dict[str, str]]) -> dict[str, Any]:
    template = launch.context_template
    activities = {key: list(value) for key, value in template.get("contextActivities", {}).items()}
    if categories:
        activities["category"] = activities.get("category", []) + [
            c for c in categories if c not in activities.get("category", [])
        ]
    context: dict[str, Any] = {**template, "registration": launch.registration}
    context["extensions"] = {**template.get("extensions", {}), SESSION_ID: launch.session}
    if activities:
        context["contextActivities"] = activities
    return context


def duration(span: dt.timedelta) -> str:
    """An ISO 8601 duration in seconds to the hundredth, as cmi5 asks (never negative)."""
    hundredths = max(0, round(span.total_seconds() * 100))
    return f"PT{hundredths // 100}.{hundredths % 100:02d}S"
