"""Analytics for a platform's own learners (the export is in exports.py):
`GET /analytics/lessons/{lesson}/funnel`, `GET /analytics/lessons/{lesson}/durations`,
`GET /analytics/lessons/{lesson}/parameters`, `GET /analytics/lessons/{lesson}/mistakes`,
`GET /analytics/lessons/{lesson}/items`, `GET /analytics/events/timeseries` and `GET /analytics/learners`.
Aggregates over fewer than k learners are suppressed."""

from __future__ import annotations

from flask import current_app
from flask.views import MethodView

from ..compute.failure_modes import REGISTRY
from ..db import analytics as q
from ..db.analytics.item_statistics import item_statistics
from ..db.stores import store_of
from ..edge.problems import Problem
from ..i18n import current, translate
from ..lessons import Lesson
from ..lessons.parameters import PARAMETERS
from . import cursors
from .auth import authorized, needs
from .schemas.analytics import (
    DateRangeArgs,
    DurationsSchema,
    FunnelSchema,
    ItemsSchema,
    LearnersArgs,
    LearnersSchema,
    MistakeCountsSchema,
    ParametersSchema,
    TimeseriesArgs,
    TimeseriesSchema,
)
from .smorest import AUTH_ERRORS, Blueprint

blp = Blueprint(
    "analytics",
    __name__,
    url_prefix="/api/v1/analytics",
    description="Aggregates over a platform's own learners (scope analytics:read).",
)


def _lesson(lesson_id: str) -> Lesson:
    lesson = current_app.extensions["lessons"].get(lesson_id)
    if lesson is None:
        raise Problem(404, f"no lesson {lesson_id!r}", slug="not-found")
    return lesson


def _k() -> int:
    return current_app.extensions["settings"].k_anonymity


def _catch_up() -> None:
    """Roll up first when far behind (never when the setting is 0: a read replica, nor when
    ClickHouse answers)."""
    store_of(current_app).catch_up(current_app.extensions["settings"].rollups_refresh_on_read_after)


def _conn():
    """The store that answers (ClickHouse when configured), every figure of an answer from one
    snapshot of it (the rollups and the events after them agree)."""
    return store_of(current_app).reading()


def _kept(count: int | None, learners: int) -> int | None:
    return count if learners >= _k() else None


def _counts(learners: int, **counts: int) -> dict:
    """A group's counts and its number of learners, all hidden (None) when the group is under k."""
    hidden = learners < _k()
    shown = {key: None if hidden else n for key, n in {**counts, "learners": learners}.items()}
    return {**shown, "suppressed": hidden}


def _window(args) -> q.Window:
    """The request's date range: within the dates every store holds, 'from' before 'to'."""
    for field, key in (("from", "from_"), ("to", "to")):
        when = args[key]
        if when is not None and not q.EARLIEST <= when < q.LATEST:
            said = f"must be from {q.EARLIEST:%Y-%m-%d} up to {q.LATEST:%Y-%m-%d} (UTC), the dates analytics hold"
            raise Problem(422, f"'{field}' {said}; got {when.isoformat()}", errors={field: [said]})
    if args["from_"] and args["to"] and args["from_"] >= args["to"]:
        raise Problem(422, "'from' must be before 'to'", errors={"from": ["must be before 'to'"]})
    return q.Window(args["from_"], args["to"])


@blp.route("/lessons/<string:lesson_id>/funnel")
class Funnel(MethodView):
    @needs("analytics:read", web=False)
    @blp.arguments(DateRangeArgs(), location="query")
    @blp.response(200, FunnelSchema)
    @blp.problems(404, 422, *AUTH_ERRORS)
    def get(self, args, lesson_id):
        """Learners per checkpoint in lesson order, and the share who went on from the previous one
        (of the learners who started the lesson between 'from' and 'to', when given)"""
        principal = authorized()
        lesson, window = _lesson(lesson_id), _window(args)
        ids = [c.id for c in lesson.checkpoints]
        _catch_up()
        with _conn() as conn:
            raw = conn.funnel(principal.platform_id, lesson.id, ids, window)
        steps, previous = [], raw["started"]
        nobody = raw["started"] == 0  # no learner at all: no one to protect, "no learners yet"
        for i, cp in enumerate(lesson.checkpoints):
            count = raw["completed"][cp.id]
            went_on = count if i == 0 else raw["after_previous"][cp.id]
            base = previous if i == 0 else raw["completed"][ids[i - 1]]
            shown = 0 if nobody else _kept(count, count)
            share = (went_on / base) if (shown is not None and base >= _k() and base) else None
            steps.append(
                {
                    "checkpoint": cp.id,
                    "title": cp.title,
                    "learners": shown,
                    "share_of_previous": None if share is None else round(min(share, 1.0), 4),
                    "suppressed": shown is None,
                }
            )
            if cp.requires == "passing-tests":
                for how in ("verified", "reported"):
                    n = raw["verification"].get((cp.id, how), 0)
                    steps[-1][how] = 0 if nobody else (_kept(n, n) if shown is not None else None)
        started = 0 if nobody else _kept(raw["started"], raw["started"])
        return {"lesson": lesson.id, "platform": principal.platform, "k": _k(), "started": started, "steps": steps}


@blp.route("/lessons/<string:lesson_id>/items")
class Items(MethodView):
    @needs("analytics:read", web=False)
    @blp.response(200, ItemsSchema)
    @blp.problems(404, *AUTH_ERRORS)
    def get(self, lesson_id):
        """Per item and phase: the share of learners whose latest answer is correct, its point-biserial
        discrimination and each choice's count with the misconception it reveals; and the cohort's
        normalized gain from before the workbench to after"""
        principal = authorized()
        lesson = _lesson(lesson_id)
        _catch_up()
        with _conn() as conn:
            sums = conn.item_sums(principal.platform_id, lesson.id)
        locale = current()
        return item_statistics(lesson, sums, _k(), lesson.in_locale(locale), lambda text: translate(text, locale))


@blp.route("/lessons/<string:lesson_id>/durations")
class Durations(MethodView):
    @needs("analytics:read", web=False)
    @blp.arguments(DateRangeArgs(), location="query")
    @blp.response(200, DurationsSchema)
    @blp.problems(404, 422, *AUTH_ERRORS)
    def get(self, args, lesson_id):
        """Per checkpoint: median and p90 time from a learner's first event in the lesson to completion
        (of the learners who started between 'from' and 'to', when given)"""
        principal = authorized()
        lesson, window = _lesson(lesson_id), _window(args)
        rows = []
        _catch_up()
        with _conn() as conn:
            ids = tuple(cp.id for cp in lesson.checkpoints)
            found = conn.durations_of(principal.platform_id, lesson.id, ids, (0.5, 0.9), window)
            for cp in lesson.checkpoints:
                n, (median, p90) = found[cp.id]
                keep = n >= _k()
                rows.append(
                    {
                        "checkpoint": cp.id,
                        "learners": n if keep else None,
                        "median_seconds": round(median, 3) if keep else None,
                        "p90_seconds": round(p90, 3) if keep else None,
                        "suppressed": not keep,
                    }
                )
        return {
            "lesson": lesson.id,
            "k": _k(),
            "measured_from": "the learner's first event in the lesson",
            "checkpoints": rows,
        }


@blp.route("/events/timeseries")
class Timeseries(MethodView):
    @needs("analytics:read", web=False)
    @blp.arguments(TimeseriesArgs(), location="query")
    @blp.response(200, TimeseriesSchema)
    @blp.problems(422, *AUTH_ERRORS)
    def get(self, args):
        """Events per hour, day or week (weeks start on Monday, UTC), by event kind or checkpoint"""
        principal = authorized()
        window = _window(args)
        _catch_up()
        with _conn() as conn:
            rows = conn.timeseries(principal.platform_id, args["bucket"], args["group_by"], window, args["lesson"])
        out = [{"bucket": b + "Z", "key": key, **_counts(learners, events=n)} for b, key, n, learners in rows]
        return {"bucket": args["bucket"], "group_by": args["group_by"], "k": _k(), "rows": out}


@blp.route("/lessons/<string:lesson_id>/parameters")
class Parameters(MethodView):
    @needs("analytics:read", web=False)
    @blp.arguments(DateRangeArgs(), location="query")
    @blp.response(200, ParametersSchema)
    @blp.problems(404, 422, *AUTH_ERRORS)
    def get(self, args, lesson_id):
        """Which workbench parameters learners changed, how often, by how many learners (changes
        between 'from' and 'to', when given)"""
        principal = authorized()
        lesson, window = _lesson(lesson_id), _window(args)
        _catch_up()
        with _conn() as conn:
            rows = conn.parameters(principal.platform_id, lesson.id, window)
            cells = conn.token_cells(principal.platform_id, lesson.id, window)
            done = conn.manipulations(principal.platform_id, lesson.id, window)
        checkpoint = next((c for c in lesson.checkpoints if c.manipulations), None)
        return {
            "lesson": lesson.id,
            "k": _k(),
            "parameters": [_parameter_row(p, n, learners) for p, n, learners in rows],
            "manipulations": _manipulation_rows(checkpoint, done) if checkpoint else None,
            "token_cells": [
                {"token": t, "dimension": d, **_counts(learners, times=n)}
                for t, d, n, learners in cells
                if t is not None
            ],
        }


def _manipulation_rows(checkpoint, done: dict[str, tuple[int, int]]) -> dict:
    """Learners who reported each of the checkpoint's manipulations, in the lesson's order (the
    funnel's checkpoint row counts those who did them all); a group under k is hidden."""
    rows = []
    for m in checkpoint.manipulations:
        reports, learners = done.get(m, (0, 0))
        rows.append({"id": m, **_counts(learners, reports=reports)})
    return {"checkpoint": checkpoint.id, "manipulations": rows}


def _parameter_row(parameter: str | None, times: int, learners: int) -> dict:
    """A parameter's row; a parameter name a client made up is free text, so a group under k
    shows neither the name nor a count."""
    known = parameter in PARAMETERS
    hidden = learners < _k()
    name = (parameter if known else "other" if hidden else parameter) or "unknown"
    return {
        "id": name,
        "description": PARAMETERS.get(name, f"hidden: fewer than {_k()} learners" if hidden else name),
        **_counts(learners, times=times),
    }


@blp.route("/lessons/<string:lesson_id>/mistakes")
class Mistakes(MethodView):
    @needs("analytics:read", web=False)
    @blp.arguments(DateRangeArgs(), location="query")
    @blp.response(200, MistakeCountsSchema)
    @blp.problems(404, 422, *AUTH_ERRORS)
    def get(self, args, lesson_id):
        """Mistakes the exercise checker diagnosed, by how many checks and learners (checks between
        'from' and 'to', when given)"""
        principal = authorized()
        lesson, window = _lesson(lesson_id), _window(args)
        with _conn() as conn:
            found = conn.mistakes(principal.platform_id, lesson.id, window)
        rows = sorted(found.items(), key=lambda item: (-item[1][0], item[0]))  # ties by id: any store, one order
        return {
            "lesson": lesson.id,
            "k": _k(),
            "mistakes": [
                {
                    "id": m,
                    "name": REGISTRY[m].name if m in REGISTRY else m,
                    "description": REGISTRY[m].description if m in REGISTRY else m,
                    **_counts(learners, times=n),
                }
                for m, (n, learners) in rows
            ],
        }


@blp.route("/learners")
class Learners(MethodView):
    @needs("analytics:read", web=False)
    @blp.arguments(LearnersArgs(), location="query")
    @blp.response(200, LearnersSchema)
    @blp.problems(400, 404, 422, *AUTH_ERRORS)
    def get(self, args):
        """Per-learner progress rows for a lesson, a page at a time (ordered by learner id)"""
        principal = authorized()
        lesson = _lesson(args["lesson"])
        after = cursors.decode(args["cursor"]) if args["cursor"] else ""
        with _conn() as conn:
            # Rows about individuals: only for a group of at least k, like every other figure here
            # (none at all hides no one: an empty page, not a suppressed one).
            if not conn.has_learners(principal.platform_id, lesson.id, _k()):
                nobody = not conn.has_learners(principal.platform_id, lesson.id, 1)
                return {"lesson": lesson.id, "k": _k(), "learners": [], "next": None, "suppressed": not nobody}
            rows = conn.learners_page(principal.platform_id, lesson.id, after, args["limit"] + 1, args["locale"])
        page = rows[: args["limit"]]
        more = len(rows) > args["limit"]
        next_cursor = cursors.encode(page[-1]["learner"]) if more else None
        return {"lesson": lesson.id, "k": _k(), "learners": page, "next": next_cursor, "suppressed": False}
