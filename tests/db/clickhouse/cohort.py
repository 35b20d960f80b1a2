"""A known cohort loaded through the API, and every analytics answer of a platform, for holding the
ClickHouse store to the SQL store (tests/db/clickhouse/)."""

import datetime as dt
import uuid

from service.db import locales
from service.db.challenges import add_check
from service.db.events import record_events
from service.db.events.core import SCORE_KEYS
from service.db.platforms import authenticate
from service.demo import cohort
from service.lessons import load_catalog

LESSON = "multi-head-attention"
ITEMS = load_catalog("content/lessons")[LESSON].items
NOW = dt.datetime.now(dt.UTC).replace(microsecond=0)


def as_posted(e) -> dict:
    """A demo event as a platform posts it (the server scores answers itself)."""
    data = {k: v for k, v in e.data.items() if k not in SCORE_KEYS} if e.item else e.data
    body = {
        "id": e.event_id,
        "learner": e.learner,
        "lesson": e.lesson,
        "checkpoint": e.checkpoint,
        "event": e.event,
        "data": data,
        "occurred_at": e.occurred_at.isoformat(),
    }
    if e.instance_id:
        body["instance_id"] = e.instance_id
    if e.item:
        body["item"] = e.item
    return body


def load_cohort(app, headers, learners: int, seed: int) -> list[str]:
    """The demo cohort (every checkpoint, answers, token edits, manipulations) posted through the
    API; its exercise checks and languages stored as the API stores them."""
    client, db = app.test_client(), app.extensions["db"]
    ids, events, verified = [], [], []
    platform = _platform(app, headers)
    with db.write() as session:
        for n, (learner, theirs, checks) in enumerate(cohort(learners, seed, NOW, ITEMS)):
            ids.append(learner)
            # A test result the challenge checker verified is recorded by the server, as it records it.
            verified += [e for e in theirs if "verification" in e.data]
            events += [as_posted(e) for e in theirs if "verification" not in e.data]
            for check in checks:
                mistakes = check["diagnosis"].split(",") if check["diagnosis"] else []
                add_check(
                    session, platform, learner, LESSON, {"tokens": "demo"}, check["correct"], 0.1, mistakes, check["at"]
                )
            if n % 3:
                locales.keep(session, platform, learner, ("en", "es", "zh-CN")[n % 3], NOW)
            if n % 4 == 0:
                events += odd_edits(learner, seed, n)
    for i in range(0, len(events), 400):
        response = client.post("/api/v1/events", json={"events": events[i : i + 400]}, headers=headers)
        assert response.status_code in (200, 201), str(response.get_json())[:1500]
    record_events(db, platform, verified, app.extensions["lessons"])
    return ids


ODD = [  # what a platform's own client may send: each store must count it by the same rules
    {"parameter": "causal", "token": 1, "dimension": 2},  # a cell only when the parameter is "token"
    {"parameter": "token", "token": 1.0, "dimension": 2},  # not a whole number
    {"parameter": "token", "token": 1000000, "dimension": 0},  # past the cap
    {"parameter": "token", "token": -1, "dimension": 0},
    {"parameter": "token", "token": 2, "dimension": 3, "manipulation": "m" * 129},  # a name too long: none
    {"parameter": "p" * 129},
    {"parameter": 5},
    {"parameter": "héads-ü", "manipulation": "édit-one-token"},  # characters, not bytes
]


def odd_edits(learner: str, seed: int, n: int) -> list[dict]:
    return [
        {
            "id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"odd/{seed}/{n}/{i}")),
            "learner": learner,
            "lesson": LESSON,
            "checkpoint": "experiment",
            "event": "parameter-changed",
            "data": data,
            "occurred_at": (NOW - dt.timedelta(days=n % 9, minutes=i)).isoformat(),
        }
        for i, data in enumerate(ODD)
    ]


def _platform(app, headers) -> int:
    with app.extensions["db"].read() as session:
        return authenticate(session, headers["Authorization"].split()[1]).platform_id


DAY = dt.timedelta(days=1)
WINDOWS = [
    {},
    {"from": (NOW - 7 * DAY).isoformat()},
    {"to": (NOW - 3 * DAY).isoformat()},
    {"from": (NOW - 10 * DAY + dt.timedelta(hours=5, minutes=7)).isoformat(), "to": (NOW - 2 * DAY).isoformat()},
]


def answers(app, headers) -> dict:
    """Every analytics endpoint's JSON (and the export's lines) for the cohort."""
    client, found = app.test_client(), {}

    def get(path, **query):
        response = client.get(path, query_string=query, headers=headers)
        assert response.status_code == 200, (path, query, response.get_data(as_text=True)[:300])
        return response.get_json() if response.is_json else response.get_data(as_text=True)

    lesson = f"/api/v1/analytics/lessons/{LESSON}"
    for i, window in enumerate(WINDOWS):
        for what in ("funnel", "durations", "parameters", "mistakes"):
            found[(what, i)] = get(f"{lesson}/{what}", **window)
        for bucket in ("hour", "day", "week"):
            for group_by in ("event", "checkpoint"):
                found[("timeseries", bucket, group_by, i)] = get(
                    "/api/v1/analytics/events/timeseries", bucket=bucket, group_by=group_by, **window
                )
                found[("timeseries", bucket, group_by, i, "lesson")] = get(
                    "/api/v1/analytics/events/timeseries", bucket=bucket, group_by=group_by, lesson=LESSON, **window
                )
    found["items"] = get(f"{lesson}/items")
    for locale in (None, "es"):
        page, cursor = [], None
        while True:
            query = {"lesson": LESSON, "limit": 7, **({"cursor": cursor} if cursor else {})}
            body = get("/api/v1/analytics/learners", **query, **({"locale": locale} if locale else {}))
            page.append(body)
            cursor = body["next"]
            if not cursor:
                break
        found[("learners", locale)] = page
    found["export"] = get("/api/v1/analytics/events/export")
    found["export-csv"] = get("/api/v1/analytics/events/export", format="csv")
    return found
