"""Every analytics figure from ClickHouse, in the shapes the SQL store's queries return (so the
API's answers are the same JSON whichever store counted). ClickHouse scans the copied events and
progress at each read: no rollups to keep, and an erased learner leaves every figure at once.
Every statement names its platform first (the tables' order) and reads FINAL (rows replaced by
key, so a row copied twice counts once)."""

from __future__ import annotations

import datetime as dt
import json
from collections import defaultdict
from types import SimpleNamespace
from typing import Any

from ..analytics import Window, cells_from, manipulations_from, parameters_from
from ..analytics.funnel import from_done, linear
from ..analytics.item_rollups import SUMS, Sums
from ..analytics.rollups import variant
from .connection import ClickHouse, moment

T = "DateTime64(6, 'UTC')"
_BUCKET = {
    "hour": "toStartOfHour(occurred_at)",
    "day": "toStartOfDay(occurred_at)",
    "week": "toDateTime(toStartOfWeek(occurred_at, 1), 'UTC')",  # weeks start on Monday
}


KEY = {
    "event": "toNullable(toString(event))",
    "checkpoint": "checkpoint",
    "parameter": "toNullable(toString(parameter))",
    "manipulation": "toNullable(toString(manipulation))",
    "cell": "cell",
}
ONLY = {
    "event": "1",
    "checkpoint": "1",
    "parameter": "event = 'parameter-changed'",
    "manipulation": "event = 'parameter-changed' AND manipulation IS NOT NULL",
    "cell": "event = 'parameter-changed' AND parameter = 'token' AND cell IS NOT NULL",
}


def _dated(column: str, window: Window, params: dict[str, Any]) -> str:
    """`column` within the window, its bounds added to `params`."""
    sql = ""
    if window.start is not None:
        params["ws"] = moment(window.start)
        sql += f" AND {column} >= {{ws:{T}}}"
    if window.end is not None:
        params["we"] = moment(window.end)
        sql += f" AND {column} < {{we:{T}}}"
    return sql


class ClickHouseReader:
    """The analytics reads on one ClickHouse database (the API's `reading()` for this store)."""

    def __init__(self, ch: ClickHouse):
        self.ch = ch

    def counts(self, grain: str, dimension: str, platform_id: int, lesson: str | None, window: Window) -> list:
        """(bucket, key, events, learners) of the events in the window, as rollups.raw_counts."""
        variant(grain, dimension, per_lesson=lesson is not None)  # the same variants as the SQL store
        params: dict[str, Any] = {"p": platform_id, "lesson": lesson or ""}
        start = _BUCKET.get(grain, "toDateTime(0, 'UTC')")
        lesson_only = "AND lesson = {lesson:String}" if lesson is not None else ""
        rows = self.ch.rows(
            f"""SELECT if({grain == "all"}, '', formatDateTime(b, '%Y-%m-%dT%H:%i:%S')), key, count(),
                       uniqExact(learner)
                FROM (SELECT {start} AS b, {KEY[dimension]} AS key, learner FROM {{db}}.events FINAL
                      WHERE platform_id = {{p:UInt32}} {lesson_only} AND {ONLY[dimension]}
                      {_dated("occurred_at", window, params)})
                GROUP BY b, key""",
            **params,
        )
        return [(b, k, int(n), int(m)) for b, k, n, m in rows]

    def timeseries(self, platform_id: int, bucket: str, group_by: str, window: Window, lesson: str | None) -> list:
        rows = self.counts(bucket, group_by, platform_id, lesson, window)
        return sorted(rows, key=lambda r: (r[0], r[1] or ""))

    def _totals(self, dimension: str, platform_id: int, lesson: str, window: Window) -> list:
        return [(key, n, m) for _, key, n, m in self.counts("all", dimension, platform_id, lesson, window)]

    def parameters(self, platform_id: int, lesson: str, window: Window) -> list:
        return parameters_from(self._totals("parameter", platform_id, lesson, window))

    def manipulations(self, platform_id: int, lesson: str, window: Window) -> dict:
        return manipulations_from(self._totals("manipulation", platform_id, lesson, window))

    def token_cells(self, platform_id: int, lesson: str, window: Window) -> list:
        return cells_from(self._totals("cell", platform_id, lesson, window))

    def mistakes(self, platform_id: int, lesson: str, window: Window) -> dict:
        """mistake id -> (checks showing it, distinct learners), as the SQL store's `mistakes`."""
        params: dict[str, Any] = {"p": platform_id, "lesson": lesson}
        rows = self.ch.rows(
            "SELECT mistake, count(), uniqExact(learner) FROM {db}.exercise_checks FINAL"
            " ARRAY JOIN splitByChar(',', assumeNotNull(diagnosis)) AS mistake WHERE platform_id = {p:UInt32}"
            " AND lesson = {lesson:String} AND diagnosis IS NOT NULL"
            + _dated("created_at", window, params)
            + " GROUP BY mistake",
            **params,
        )
        return {m: (int(n), int(learners)) for m, n, learners in rows}

    def _starters(self, window: Window, params: dict[str, Any]) -> str:
        """Progress rows kept to the learners who started the lesson within the window."""
        if not window:
            return ""
        return (
            " AND learner IN (SELECT learner FROM {db}.learner_lessons FINAL WHERE platform_id = {p:UInt32}"
            " AND lesson = {lesson:String}" + _dated("first_event_at", window, params) + ")"
        )

    def funnel(self, platform_id: int, lesson: str, checkpoint_ids: list[str], window: Window) -> dict:
        """Learners grouped by what they completed (and how each test result was known)."""
        params: dict[str, Any] = {"p": platform_id, "lesson": lesson}
        started = self.ch.rows(
            "SELECT count() FROM {db}.learner_lessons FINAL WHERE platform_id = {p:UInt32}"
            " AND lesson = {lesson:String}" + _dated("first_event_at", window, params),
            **params,
        )[0][0]
        groups = self.ch.rows(
            f"""SELECT state, count() FROM (
                  SELECT learner, arraySort(groupArray((checkpoint, ifNull(verification, '')))) AS state
                  FROM {{db}}.checkpoint_progress FINAL
                  WHERE platform_id = {{p:UInt32}} AND lesson = {{lesson:String}} {self._starters(window, params)}
                  GROUP BY learner)
                GROUP BY state""",
            **params,
        )
        found = from_done(((dict(state), int(n)) for state, n in groups), checkpoint_ids)
        # Learners who started but completed nothing are in no group.
        return {**found, "started": int(started)}

    def durations_of(
        self,
        platform_id: int,
        lesson: str,
        checkpoints: tuple[str, ...],
        quantiles: tuple[float, ...],
        window: Window,
    ) -> dict[str, tuple[int, list[float]]]:
        """checkpoint -> (learners, quantiles of whole seconds): each quantile from the values at
        its position's floor and the next, picked from the sorted values in ClickHouse."""
        params: dict[str, Any] = {"p": platform_id, "lesson": lesson}
        picks = []
        for i, q in enumerate(quantiles):
            params[f"q{i}"] = q
            low = f"toUInt64(floor({{q{i}:Float64}} * (length(s) - 1))) + 1"
            picks += [f"s[{low}]", f"s[least({low} + 1, length(s))]"]
        rows = self.ch.rows(
            f"""SELECT checkpoint, length(s), {", ".join(picks)} FROM (
                  SELECT checkpoint, arraySort(groupArray(toInt64(seconds_from_start))) AS s
                  FROM {{db}}.checkpoint_progress FINAL
                  WHERE platform_id = {{p:UInt32}} AND lesson = {{lesson:String}}
                    AND seconds_from_start IS NOT NULL {self._starters(window, params)}
                  GROUP BY checkpoint)""",
            **params,
        )
        found = {
            c: (int(n), [linear(q, int(n), float(v[2 * i]), float(v[2 * i + 1])) for i, q in enumerate(quantiles)])
            for c, n, *v in rows
        }
        return {c: found.get(c, (0, [0.0 for _ in quantiles])) for c in checkpoints}

    def has_learners(self, platform_id: int, lesson: str, at_least: int) -> bool:
        found = self.ch.rows(
            "SELECT count() FROM (SELECT 1 FROM {db}.learner_lessons FINAL WHERE platform_id = {p:UInt32}"
            " AND lesson = {lesson:String} LIMIT {k:UInt64})",
            p=platform_id,
            lesson=lesson,
            k=at_least,
        )
        return int(found[0][0]) >= at_least

    def learners_page(self, platform_id: int, lesson: str, after: str, limit: int, locale: str | None = None) -> list:
        params: dict[str, Any] = {"p": platform_id, "lesson": lesson, "after": after, "n": limit}
        if locale is not None:
            params["locale"] = locale
        visits = self.ch.rows(
            f"""SELECT v.learner, v.first_event_at, l.locale
                FROM (SELECT learner, first_event_at FROM {{db}}.learner_lessons FINAL
                      WHERE platform_id = {{p:UInt32}} AND lesson = {{lesson:String}}
                        AND learner > {{after:String}}) AS v
                LEFT JOIN (SELECT learner, toNullable(toString(locale)) AS locale FROM {{db}}.learner_locales FINAL
                           WHERE platform_id = {{p:UInt32}}) AS l ON v.learner = l.learner
                {"WHERE l.locale = {locale:String}" if locale is not None else ""}
                ORDER BY v.learner LIMIT {{n:UInt64}} SETTINGS join_use_nulls = 1""",
            **params,
        )
        done: dict[str, dict[str, Any]] = defaultdict(dict)
        if visits:
            for learner, checkpoint, at in self.ch.rows(
                "SELECT learner, toString(checkpoint), completed_at FROM {db}.checkpoint_progress FINAL"
                " WHERE platform_id = {p:UInt32} AND lesson = {lesson:String} AND has({ls:Array(String)}, learner)",
                p=platform_id,
                lesson=lesson,
                ls=[v[0] for v in visits],
            ):
                done[learner][checkpoint] = at
        return [
            {"learner": v, "locale": language, "started_at": first, "completed": done[v]}
            for v, first, language in visits
        ]

    def item_sums(self, platform_id: int, lesson: str) -> Sums:
        """The item statistics' sums (service/db/analytics/item_rollups.py: what each learner's
        latest answer per phase and item adds), summed in ClickHouse."""
        latest = """SELECT learner, phase, item, argMax((response, correct), (occurred_at, id)) AS a
            FROM {db}.events FINAL WHERE platform_id = {p:UInt32} AND lesson = {lesson:String}
              AND event = 'answered' AND item IS NOT NULL AND phase IS NOT NULL AND response IS NOT NULL
            GROUP BY learner, phase, item"""
        params = {"p": platform_id, "lesson": lesson}
        found: Sums = defaultdict(lambda: [0] * len(SUMS))
        for phase, item, raw, correct, n in self.ch.rows(
            f"SELECT phase, item, a.1, a.2, count() FROM ({latest}) GROUP BY phase, item, a.1, a.2", **params
        ):
            response = json.loads(raw)
            said = response if isinstance(response, str) else repr(float(response))  # 2 and 2.0: one group
            found[("choice", f"{phase}/{item}/{said}/{int(correct)}")][0] += int(n)
        for phase, item, *values in self.ch.rows(
            f"""SELECT phase, item, count(), sum(x), sum(y), sum(x * y), sum(y * y) FROM (
                  SELECT phase, item, a.2 AS x, sum(a.2) OVER (PARTITION BY learner, phase) - a.2 AS y
                  FROM ({latest})) GROUP BY phase, item""",
            **params,
        ):
            found[("pair", f"{phase}/{item}")] = [int(v) for v in values]
        for pre, post, *values in self.ch.rows(
            f"""SELECT pre, post, count(), sum(pre_correct), sum(post_correct), 0, 0 FROM (
                  SELECT countIf(phase = 'pre') AS pre, countIf(phase = 'post') AS post,
                         sumIf(a.2, phase = 'pre') AS pre_correct, sumIf(a.2, phase = 'post') AS post_correct
                  FROM ({latest}) GROUP BY learner HAVING pre > 0 AND post > 0) GROUP BY pre, post""",
            **params,
        ):
            found[("gain", f"{pre}/{post}")] = [int(v) for v in values]
        return dict(found)

    def export_page(self, platform_id: int, after: tuple[dt.datetime, int] | None, through: dt.datetime, limit: int):
        params: dict[str, Any] = {"p": platform_id, "through": moment(through), "n": limit}
        cursor = ""
        if after is not None:
            params["s"], params["i"] = moment(after[0]), after[1]
            cursor = f" AND (stored_at, id) > ({{s:{T}}}, {{i:UInt64}})"
        rows = self.ch.rows(
            "SELECT platform_id, id, event_id, learner, lesson, checkpoint, toString(event), instance_id, item, data,"
            f" occurred_at, stored_at FROM {{db}}.events FINAL WHERE platform_id = {{p:UInt32}}"
            f" AND stored_at <= {{through:{T}}}{cursor} ORDER BY stored_at, id LIMIT {{n:UInt64}}",
            **params,
        )
        names = ("platform_id", "id", "event_id", "learner", "lesson", "checkpoint", "event", "instance_id", "item")
        return [
            SimpleNamespace(
                **dict(zip(names, r[:9], strict=True)), data=json.loads(r[9]), occurred_at=r[10], stored_at=r[11]
            )
            for r in rows
        ]

    def locales_of(self, platform_id: int, learners) -> dict[str, str]:
        wanted = sorted(set(learners))
        if not wanted:
            return {}
        return dict(
            self.ch.rows(
                "SELECT learner, toString(locale) FROM {db}.learner_locales FINAL"
                " WHERE platform_id = {p:UInt32} AND has({ls:Array(String)}, learner)",
                p=platform_id,
                ls=wanted,
            )
        )

    def synced_through(self) -> dt.datetime | None:
        """When the last sync began: events committed before it are here (None: never synced)."""
        found = self.ch.rows("SELECT mark FROM {db}.sync_marks FINAL WHERE source = 'synced_at'")
        return dt.datetime.fromtimestamp(found[0][0] / 1_000_000, dt.UTC) if found else None
