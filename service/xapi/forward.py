"""Forward each platform's statements to the LRS it configured: batches, Basic auth, retries
with backoff, a cursor in the database (so it survives restarts), and re-sends that the LRS
already holds (409, or 204 for identical statements) counted as delivered."""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

import requests
from sqlalchemy import func, select

from ..db import Database
from ..db.platforms import platform_by_name
from ..db.tables import Event, Platform, XapiForwarding
from ..lessons import Lesson
from . import statements as xapi
from .queries import events_after

log = logging.getLogger(__name__)
MAX_BACKOFF = 300


def configure(db: Database, platform: str, endpoint: str, username: str, password: str) -> None:
    with db.write() as session:
        found = platform_by_name(session, platform)
        if found is None:
            raise ValueError(f"no platform {platform!r}")
        row = session.get(XapiForwarding, found.id)
        if row is None:
            session.add(
                XapiForwarding(
                    platform_id=found.id,
                    endpoint=endpoint,
                    username=username,
                    password=password,
                    last_event_row=0,
                    sent=0,
                    failures=0,
                )
            )
        else:
            row.endpoint, row.username, row.password = endpoint, username, password


def statements_url(endpoint: str) -> str:
    return endpoint.rstrip("/") + ("" if endpoint.rstrip("/").endswith("/statements") else "/statements")


def backlog(db: Database) -> dict[str, int]:
    with db.read() as conn:
        rows = conn.execute(
            select(Platform.name, func.count(Event.id))
            .select_from(XapiForwarding)
            .join(Platform, Platform.id == XapiForwarding.platform_id)
            .join(Event, (Event.platform_id == Platform.id) & (Event.id > XapiForwarding.last_event_row), isouter=True)
            .group_by(Platform.name)
        )
        return {name: count for name, count in rows}


def backoff(failures: int) -> int:
    """Seconds to wait after this many failures in a row (2, 4, 8, ... at most MAX_BACKOFF);
    LTI grades (service/lti/grades.py) retry on the same schedule."""
    return min(MAX_BACKOFF, 2 ** min(failures, 9))


def forward_once(
    db: Database,
    lessons: dict[str, Lesson],
    activity_base: str,
    batch: int = 100,
    settle_seconds: int = 10,
    http: requests.Session | None = None,
    timeout: float = 10.0,
) -> dict[str, Any]:
    """One pass over every configured platform; returns per-platform counts and errors."""
    http = http or requests.Session()
    now = dt.datetime.now(dt.UTC)
    settled = now - dt.timedelta(seconds=settle_seconds)  # later commits could still slip in before this
    report: dict[str, Any] = {}
    with db.read() as session:
        targets = session.execute(
            select(XapiForwarding, Platform).join(Platform, Platform.id == XapiForwarding.platform_id)
        ).all()
    for target, platform in targets:
        if target.next_attempt_at is not None and target.next_attempt_at > now:
            report[platform.name] = {"sent": 0, "waiting_until": target.next_attempt_at.isoformat()}
            continue
        sent, error = _forward_platform(db, target, platform, lessons, activity_base, batch, settled, http, timeout)
        if error is not None:
            failures = target.failures + 1
            wait = backoff(failures)
            _save(db, target, failures=failures, error=error[:1024], next_attempt=now + dt.timedelta(seconds=wait))
            log.warning(
                "xAPI forwarding for platform %s failed (%s); the next pass after %s s retries",
                platform.name,
                error,
                wait,
            )
            report[platform.name] = {"sent": sent, "error": error, "retry_in": wait}
        else:
            report[platform.name] = {"sent": sent, "error": None}
    return report


def _forward_platform(db, target, platform, lessons, activity_base, batch, settled, http, timeout):
    """Send one platform's settled events in batches from its cursor: (sent, error or None)."""
    sent = 0
    while True:
        with db.read() as session:
            rows = events_after(session, platform.id, target.last_event_row, settled, batch)
            body = xapi.statements_of(session, platform.id, rows, platform.home_page, activity_base, lessons)
        if not rows:
            return sent, None
        try:
            _deliver(http, target, body, timeout)
        except DeliveryError as exc:
            return sent, str(exc)
        target.last_event_row = rows[-1].id
        target.last_stored_at = rows[-1].stored_at
        target.sent += len(rows)
        sent += len(rows)
        _save(db, target, failures=0, error=None, next_attempt=None)


class DeliveryError(Exception):
    pass


def _post(http: requests.Session, target: XapiForwarding, body: Any, timeout: float) -> requests.Response:
    try:
        return http.post(
            statements_url(target.endpoint),
            json=body,
            auth=(target.username, target.password),
            headers={"X-Experience-API-Version": xapi.VERSION},
            timeout=timeout,
        )
    except requests.RequestException as exc:
        raise DeliveryError(f"{type(exc).__name__}: {exc}") from None


def _deliver(http: requests.Session, target: XapiForwarding, statements: list[dict], timeout: float) -> None:
    response = _post(http, target, statements, timeout)
    if response.status_code in (200, 204):
        return
    if response.status_code == 409:
        # Some of these ids are already in the LRS (a re-send after a crash): send one by one and
        # count a 409 for a single statement as already delivered.
        for statement in statements:
            single = _post(http, target, statement, timeout)
            if single.status_code not in (200, 204, 409):
                raise DeliveryError(
                    f"LRS answered {single.status_code} for statement {statement['id']}: {single.text[:300]}"
                )
        return
    raise DeliveryError(f"LRS answered {response.status_code}: {response.text[:300]}")


def _save(
    db: Database, target: XapiForwarding, *, failures: int, error: str | None, next_attempt: dt.datetime | None
) -> None:
    with db.write() as session:
        row = session.get(XapiForwarding, target.platform_id)
        if row is None:  # the platform's forwarding was removed meanwhile: nothing to keep
            return
        row.last_event_row = target.last_event_row
        row.last_stored_at = target.last_stored_at
        row.sent = target.sent
        row.failures = failures
        row.last_error = error
        row.next_attempt_at = next_attempt
    target.failures = failures
