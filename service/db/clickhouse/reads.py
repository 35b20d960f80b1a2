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

from ..analytics import Window, cells_from, manipulations_from, parameters_from, timeseries_from
from ..analytics.duration_quantiles import linear
from ..analytics.item_rollups import Sums
from ..analytics.rollups import decode_key, variant
from .connection import ClickHouse, moment

T = "DateTime64(6, 'UTC')"
_FROM_HOUR = {"hour": "hour", "day": "toStartOfDay(hour)", "week": "toDateTime(toStartOfWeek(hour, 1), 'UTC')"}
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

    def whole(self, grain: str, dimension: str, platform_id: int, lesson: str | None, bounds: tuple) -> list:
        """(bucket, key, events, learners) of whole buckets within `bounds` (datetimes, None for no
        bound), from the counts the view keeps per hour (distinct learners merged across hours
        and lessons)."""
        params: dict[str, Any] = {"p": platform_id, "d": dimension, "lesson": lesson or ""}
        within = "AND lesson = {lesson:String}" if lesson is not None else ""
        for name, bound, op in (("hs", bounds[0], ">="), ("he", bounds[1], "<")):
            if bound is not None:
                params[name] = moment(bound)
                within += f" AND hour {op} {{{name}:{T}}}"
        bucket = f"formatDateTime({_FROM_HOUR[grain]}, '%Y-%m-%dT%H:%i:%S')" if grain in _FROM_HOUR else "''"
        rows = self.ch.rows(
            f"""SELECT {bucket} AS b, key, sum(events), uniqExactMerge(learners) FROM {{db}}.event_counts
                WHERE platform_id = {{p:UInt32}} AND dimension = {{d:String}} {within} GROUP BY b, key""",
            **params,
        )
        return [(b, decode_key(k), int(n), int(m)) for b, k, n, m in rows]

    def timeseries(self, platform_id: int, bucket: str, group_by: str, window: Window, lesson: str | None) -> list:
        return timeseries_from(
            bucket,
            window,
            lambda start, end: self.counts(bucket, group_by, platform_id, lesson, Window(start, end)),
            lambda _, bounds: self.whole(bucket, group_by, platform_id, lesson, bounds),
        )

    def _totals(self, dimension: str, platform_id: int, lesson: str, window: Window) -> list:
        """(key, events, learners) of a whole-period dimension: from the kept counts, or counted
        from the events within the window (as the SQL store does)."""
        if window:
            rows = self.counts("all", dimension, platform_id, lesson, window)
        else:
            rows = self.whole("all", dimension, platform_id, lesson, (None, None))
        return [(key, n, m) for _, key, n, m in rows]

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
        """Learners who started, completed each checkpoint, and went on from the previous one."""
        params: dict[str, Any] = {"p": platform_id, "lesson": lesson}
        started = self.ch.rows(
            "SELECT count() FROM {db}.learner_lessons FINAL WHERE platform_id = {p:UInt32}"
            " AND lesson = {lesson:String}" + _dated("first_event_at", window, params),
            **params,
        )[0][0]
        where = f"platform_id = {{p:UInt32}} AND lesson = {{lesson:String}} {self._starters(window, params)}"
        completed: dict[str, int] = dict.fromkeys(checkpoint_ids, 0)
        verification: dict[tuple[str, str], int] = {}
        for checkpoint, how, n in self.ch.rows(
            f"SELECT toString(checkpoint), verification, count() FROM {{db}}.checkpoint_progress FINAL WHERE {where}"
            " GROUP BY checkpoint, verification",
            **params,
        ):
            completed[checkpoint] = completed.get(checkpoint, 0) + int(n)
            if how is not None:
                verification[(checkpoint, how)] = int(n)
        # Learners who completed a checkpoint and the one before it: both counts less those who
        # completed either (one scan, no grouping by learner).
        pairs = list(zip(checkpoint_ids, checkpoint_ids[1:], strict=False))
        either = [f"uniqExactIf(learner, checkpoint IN ({{a{i}:String}}, {{b{i}:String}}))" for i in range(len(pairs))]
        for i, (previous, current) in enumerate(pairs):
            params[f"a{i}"], params[f"b{i}"] = previous, current
        unions = (
            self.ch.rows(f"SELECT {', '.join(either)} FROM {{db}}.checkpoint_progress FINAL WHERE {where}", **params)[0]
            if pairs
            else ()
        )
        return {
            "started": int(started),
            "completed": {c: completed[c] for c in checkpoint_ids},
            "after_previous": {
                current: completed[previous] + completed[current] - int(union)
                for (previous, current), union in zip(pairs, unions, strict=True)
            },
            "verification": verification,
        }

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
        """A page of the lesson's learners after `after`, the page found first and its learners'
        languages then (with `locale`, among those who read in it)."""
        params: dict[str, Any] = {
            "p": platform_id,
            "lesson": lesson,
            "after": after,
            "n": limit,
            "locale": locale or "",
        }
        readers = (
            " AND learner IN (SELECT learner FROM {db}.learner_locales FINAL"
            " WHERE platform_id = {p:UInt32} AND locale = {locale:String})"
        )
        page = self.ch.rows(
            "SELECT learner, first_event_at FROM {db}.learner_lessons FINAL WHERE platform_id = {p:UInt32}"
            " AND lesson = {lesson:String} AND learner > {after:String}"
            + (readers if locale is not None else "")
            + " ORDER BY learner LIMIT {n:UInt64}",
            **params,
        )
        languages = self.locales_of(platform_id, [learner for learner, _ in page])
        visits = [(learner, first, languages.get(learner)) for learner, first in page]
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
        """The item statistics' sums as the primary database held them at the last sync (sync.py:
        they are sums over each learner's latest answers, kept by the primary's rollups)."""
        rows = self.ch.rows(
            "SELECT toString(dimension), key, learners, sx, sy, sxy, syy FROM {db}.item_sums FINAL"
            " WHERE platform_id = {p:UInt32} AND lesson = {lesson:String} AND learners > 0",
            p=platform_id,
            lesson=lesson,
        )
        return {(d, k): [int(v) for v in values] for d, k, *values in rows}

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
