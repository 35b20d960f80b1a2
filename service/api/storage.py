"""Storage quotas as the API applies them (the counting is service/db/quotas.py): before a write,
what its subjects used this period (read, unless this process knows them far from their quotas:
`quotas.Seen`); past a quota, 429 with Retry-After (or 413 when the request alone is larger than
the quota), naming the quota, and counted in the metrics."""

from __future__ import annotations

import time
from typing import Any

from flask import Flask

from ..db import quotas
from ..db.events import Counted
from ..edge.caller import Caller
from ..edge.problems import Problem
from ..identity import WEB_PLATFORM, block_of
from ..observability import QUOTA_ALARMS, QUOTA_REFUSALS
from ..text import N_


def counted(app: Flask, caller: Caller) -> Counted:
    """What a request's writes count against: the app's quotas, the caller's browser session and,
    for a browser session without a platform's launch (anyone can start one), its network, with the
    web platform's own quota an alarm rather than a refusal."""
    sid = caller.session.get("sid")
    session = quotas.session_subject(sid if isinstance(sid, str) else None)
    if not anonymous_learner(caller):
        return Counted(app.extensions["quotas"], session)
    network = quotas.network_subject(block_of(caller.address.removeprefix("address:")))
    return Counted(app.extensions["quotas"], session, network, frozenset({"platform"}))


def anonymous_learner(caller: Caller) -> bool:
    """A browser learner of the web platform: a session anyone may start, no platform's launch."""
    who = caller.principal
    return who is not None and who.learner is not None and who.platform == WEB_PLATFORM


def check(app: Flask, platform_id: int, rows: list[quotas.Stored], counting: Counted) -> None:
    """Refuse, before anything is written, what would take a learner, a session or the platform
    past a quota (as if every row were new: a replay is checked too, and not counted after)."""
    if not counting.quotas or not rows:
        return
    wanted, now = quotas.demand(platform_id, rows, counting.session, counting.network), time.time()
    seen: quotas.Seen = app.extensions["quota_seen"]
    if not seen.clear(counting.quotas, wanted, now):  # near a quota, or not read lately: read
        try:
            with app.extensions["db"].reader.connect() as conn:
                read, alarmed = quotas.check(conn, counting.quotas, wanted, now, counting.alarms)
        except quotas.QuotaExceeded as over:
            raise refusal(over) from None
        seen.remember(read, now)
        for passed in alarmed:
            QUOTA_ALARMS.labels(passed.quota.name).inc()
    seen.let_through(counting.quotas, wanted, now)


def count_in(conn: Any, platform_id: int, rows: list[quotas.Stored], counting: Counted) -> None:
    """Count rows stored outside the events' own write (exercise checks), in their transaction."""
    wanted = quotas.demand(platform_id, rows, counting.session, counting.network)
    quotas.add_usage(conn, quotas.usage_rows(counting.quotas, wanted, time.time()))


def refusal(over: quotas.QuotaExceeded) -> Problem:
    q = over.quota
    QUOTA_REFUSALS.labels(q.name).inc()
    limit = f"{q.amount:,} {q.measure} per {_period(q.seconds)}"
    extra = {"quota": q.name, "limit": q.amount, "period_seconds": q.seconds}
    extra |= {"used": over.used, "requested": over.asked}
    if over.too_large:
        return Problem(
            413,
            N_("this request alone is more than the %(quota)s quota allows (%(limit)s): send less at once"),
            args={"quota": q.name, "limit": limit},
            slug="storage-quota",
            extra=extra,
        )
    return Problem(
        429,
        N_("storage quota reached: %(quota)s is %(limit)s and %(used)s are used; try again in %(seconds)s s"),
        args={"quota": q.name, "limit": limit, "used": f"{over.used:,}", "seconds": over.retry_after},
        headers={"Retry-After": str(over.retry_after)},
        slug="storage-quota",
        extra=extra,
    )


def _period(seconds: int) -> str:
    for name, length in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds % length == 0:
            n = seconds // length
            return name if n == 1 else f"{n} {name}s"
    return f"{seconds} s"
