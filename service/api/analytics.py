"""Analytics for a platform's own learners: funnel, time series, durations, parameters, mistakes,
learner rows and a streamed export. Aggregates over fewer than k learners are suppressed."""

from __future__ import annotations

import csv
import datetime as dt
import io
from typing import Any

import orjson
from flask import Response, current_app, stream_with_context
from flask.views import MethodView
from marshmallow import Schema, fields, validate

from ..db import analytics as q
from ..db.progress import event_json
from ..lessons import Lesson
from . import cursors
from .auth import current_principal
from .core import Blueprint
from .event_schemas import name
from .fields import SafeString, UTCDateTime
from .problems import Problem

blp = Blueprint(
    "analytics",
    __name__,
    url_prefix="/api/v1/analytics",
    description="Aggregates and exports over a platform's own learners (scope analytics:read).",
)
AUTH_ERRORS = (401, 403, 429, 503)


def _lesson(lesson_id: str) -> Lesson:
    lesson = current_app.extensions["lessons"].get(lesson_id)
    if lesson is None:
        raise Problem(404, f"no lesson {lesson_id!r}", slug="not-found")
    return lesson


def _k() -> int:
    return current_app.extensions["settings"].k_anonymity


def _conn():
    return current_app.extensions["db"].engine.connect()


def _kept(count: int | None, learners: int) -> int | None:
    return count if learners >= _k() else None


class Suppression(Schema):
    k = fields.Integer(metadata={"description": "groups of fewer learners are suppressed (null)"})


class FunnelStepSchema(Schema):
    checkpoint = fields.String()
    title = fields.String()
    learners = fields.Integer(allow_none=True)
    share_of_previous = fields.Float(
        allow_none=True,
        metadata={"description": "of the learners who completed the previous step, the share who completed this one"},
    )
    suppressed = fields.Boolean()
    verified = fields.Integer(
        allow_none=True,
        metadata={"description": "test checkpoints: learners whose numbers the server checked (null: under k)"},
    )
    reported = fields.Integer(
        allow_none=True,
        metadata={"description": "test checkpoints: learners whose platform reported passing tests (null: under k)"},
    )


class FunnelSchema(Suppression):
    lesson = fields.String()
    started = fields.Integer(allow_none=True)
    steps = fields.List(fields.Nested(FunnelStepSchema))


@blp.route("/lessons/<string:lesson_id>/funnel")
class Funnel(MethodView):
    @blp.response(200, FunnelSchema)
    @blp.problems(404, *AUTH_ERRORS)
    def get(self, lesson_id):
        """Learners per checkpoint in lesson order, and the share who went on from the previous one"""
        principal = current_principal("analytics:read", allow_web=False)
        lesson = _lesson(lesson_id)
        ids = [c.id for c in lesson.checkpoints]
        with _conn() as conn:
            raw = q.funnel(conn, principal.platform_id, lesson.id, ids)
        steps, previous = [], raw["started"]
        for i, cp in enumerate(lesson.checkpoints):
            count = raw["completed"][cp.id]
            went_on = count if i == 0 else raw["after_previous"][cp.id]
            base = previous if i == 0 else raw["completed"][ids[i - 1]]
            shown = _kept(count, count)
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
                    steps[-1][how] = _kept(n, n) if shown is not None else None
        return {"lesson": lesson.id, "k": _k(), "started": _kept(raw["started"], raw["started"]), "steps": steps}


class DurationSchema(Schema):
    checkpoint = fields.String()
    learners = fields.Integer(allow_none=True)
    median_seconds = fields.Float(allow_none=True)
    p90_seconds = fields.Float(allow_none=True)
    suppressed = fields.Boolean()


class DurationsSchema(Suppression):
    lesson = fields.String()
    measured_from = fields.String()
    checkpoints = fields.List(fields.Nested(DurationSchema))


@blp.route("/lessons/<string:lesson_id>/durations")
class Durations(MethodView):
    @blp.response(200, DurationsSchema)
    @blp.problems(404, *AUTH_ERRORS)
    def get(self, lesson_id):
        """Per checkpoint: median and p90 time from a learner's first event in the lesson to completion"""
        principal = current_principal("analytics:read", allow_web=False)
        lesson = _lesson(lesson_id)
        rows = []
        with _conn() as conn:
            for cp in lesson.checkpoints:
                n, (median, p90) = q.durations(conn, principal.platform_id, lesson.id, cp.id, (0.5, 0.9))
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


class TimeseriesArgs(Schema):
    bucket = SafeString(load_default="day", validate=validate.OneOf(q.BUCKETS))
    group_by = SafeString(load_default="event", validate=validate.OneOf(("event", "checkpoint")))
    from_ = UTCDateTime(data_key="from", load_default=None)
    to = UTCDateTime(load_default=None)
    lesson = SafeString(load_default=None, validate=name(64))


class TimeseriesRowSchema(Schema):
    bucket = fields.String(metadata={"description": "bucket start, UTC"})
    key = fields.String(allow_none=True)
    events = fields.Integer(allow_none=True)
    learners = fields.Integer(allow_none=True)
    suppressed = fields.Boolean()


class TimeseriesSchema(Suppression):
    bucket = fields.String()
    group_by = fields.String()
    rows = fields.List(fields.Nested(TimeseriesRowSchema))


@blp.route("/events/timeseries")
class Timeseries(MethodView):
    @blp.arguments(TimeseriesArgs(), location="query")
    @blp.response(200, TimeseriesSchema)
    @blp.problems(422, *AUTH_ERRORS)
    def get(self, args):
        """Events per hour, day or week (weeks start on Monday, UTC), by event kind or checkpoint"""
        principal = current_principal("analytics:read", allow_web=False)
        if args["from_"] and args["to"] and args["from_"] >= args["to"]:
            raise Problem(422, "'from' must be before 'to'", errors={"from": ["must be before 'to'"]})
        with _conn() as conn:
            rows = q.timeseries(
                conn, principal.platform_id, args["bucket"], args["group_by"], args["from_"], args["to"], args["lesson"]
            )
        out = [
            {
                "bucket": b + "Z",
                "key": key,
                "events": _kept(n, learners),
                "learners": _kept(learners, learners),
                "suppressed": learners < _k(),
            }
            for b, key, n, learners in rows
        ]
        return {"bucket": args["bucket"], "group_by": args["group_by"], "k": _k(), "rows": out}


class CountRowSchema(Schema):
    id = fields.String()
    description = fields.String()
    times = fields.Integer(allow_none=True)
    learners = fields.Integer(allow_none=True)
    suppressed = fields.Boolean()


class ParametersSchema(Suppression):
    lesson = fields.String()
    parameters = fields.List(fields.Nested(CountRowSchema))
    token_cells = fields.List(fields.Dict(), metadata={"description": "which token dimensions were edited"})


PARAMETER_NAMES = {
    "token": "a token coordinate",
    "causal": "the causal mask",
    "reuse_first_slice": "the broken head reuse",
    "failure_mode": "the failure-mode comparison",
    "reset": "reset of the tokens",
}


@blp.route("/lessons/<string:lesson_id>/parameters")
class Parameters(MethodView):
    @blp.response(200, ParametersSchema)
    @blp.problems(404, *AUTH_ERRORS)
    def get(self, lesson_id):
        """Which workbench parameters learners changed, how often, by how many learners"""
        principal = current_principal("analytics:read", allow_web=False)
        lesson = _lesson(lesson_id)
        with _conn() as conn:
            rows = q.parameters(conn, principal.platform_id, lesson.id)
            cells = q.token_cells(conn, principal.platform_id, lesson.id)
        return {
            "lesson": lesson.id,
            "k": _k(),
            "parameters": [
                {
                    "id": p or "unknown",
                    "description": PARAMETER_NAMES.get(p, p or "unknown"),
                    "times": _kept(n, learners),
                    "learners": _kept(learners, learners),
                    "suppressed": learners < _k(),
                }
                for p, n, learners in rows
            ],
            "token_cells": [{"token": t, "dimension": d, "times": n} for t, d, n in cells if t is not None],
        }


class MistakeCountsSchema(Suppression):
    lesson = fields.String()
    mistakes = fields.List(fields.Nested(CountRowSchema))


@blp.route("/lessons/<string:lesson_id>/mistakes")
class Mistakes(MethodView):
    @blp.response(200, MistakeCountsSchema)
    @blp.problems(404, *AUTH_ERRORS)
    def get(self, lesson_id):
        """Mistakes the exercise checker diagnosed, by how many checks and learners"""
        from ..compute.diagnose import MISTAKES

        principal = current_principal("analytics:read", allow_web=False)
        lesson = _lesson(lesson_id)
        with _conn() as conn:
            found = q.mistakes(conn, principal.platform_id, lesson.id)
        rows = sorted(found.items(), key=lambda item: -item[1][0])
        return {
            "lesson": lesson.id,
            "k": _k(),
            "mistakes": [
                {
                    "id": m,
                    "description": MISTAKES.get(m, m),
                    "times": _kept(n, learners),
                    "learners": _kept(learners, learners),
                    "suppressed": learners < _k(),
                }
                for m, (n, learners) in rows
            ],
        }


class LearnersArgs(Schema):
    lesson = SafeString(required=True, validate=name(64))
    limit = fields.Integer(load_default=100, validate=validate.Range(1, 1000))
    cursor = SafeString(load_default=None, validate=validate.Length(1, 512))


class LearnerRowSchema(Schema):
    learner = fields.String()
    started_at = fields.DateTime()
    completed = fields.Dict(keys=fields.String(), values=fields.DateTime())


class LearnersSchema(Schema):
    lesson = fields.String()
    learners = fields.List(fields.Nested(LearnerRowSchema))
    next = fields.String(allow_none=True)


@blp.route("/learners")
class Learners(MethodView):
    @blp.arguments(LearnersArgs(), location="query")
    @blp.response(200, LearnersSchema)
    @blp.problems(400, 404, 422, *AUTH_ERRORS)
    def get(self, args):
        """Per-learner progress rows for a lesson, a page at a time (ordered by learner id)"""
        principal = current_principal("analytics:read", allow_web=False)
        lesson = _lesson(args["lesson"])
        after = cursors.decode(args["cursor"]) if args["cursor"] else ""
        with _conn() as conn:
            rows = q.learners_page(conn, principal.platform_id, lesson.id, after, args["limit"] + 1)
        page = rows[: args["limit"]]
        more = len(rows) > args["limit"]
        return {"lesson": lesson.id, "learners": page, "next": cursors.encode(page[-1]["learner"]) if more else None}


class ExportArgs(Schema):
    format = SafeString(load_default="ndjson", validate=validate.OneOf(("ndjson", "csv")))
    after = SafeString(
        load_default=None, validate=validate.Length(1, 512), metadata={"description": "resume after this row's cursor"}
    )
    limit = fields.Integer(load_default=None, validate=validate.Range(1, 10_000_000))


EXPORT_FIELDS = (
    "id",
    "learner",
    "lesson",
    "checkpoint",
    "event",
    "instance_id",
    "data",
    "occurred_at",
    "stored_at",
    "cursor",
)
PAGE = 2000


@blp.route("/events/export")
class Export(MethodView):
    @blp.arguments(ExportArgs(), location="query")
    @blp.response(200, content_type="application/x-ndjson", description="One event per line (or CSV rows)")
    @blp.problems(400, 422, *AUTH_ERRORS)
    def get(self, args):
        """Every event of the platform once, streamed in (stored time, id) order, resumable"""
        principal = current_principal("analytics:read", allow_web=False)
        after = _decode_row(args["after"]) if args["after"] else None
        settle = current_app.extensions["settings"].export_settle_seconds
        through = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=settle)
        db = current_app.extensions["db"]
        csv_format = args["format"] == "csv"

        def rows():
            cursor, left = after, args["limit"]
            if csv_format:
                yield _csv_line(EXPORT_FIELDS)
            while left is None or left > 0:
                size = PAGE if left is None else min(PAGE, left)
                with db.engine.connect() as conn:
                    batch = q.export_page(conn, principal.platform_id, cursor, through, size)
                for row in batch:
                    record = _export_record(row)
                    yield (
                        _csv_line(
                            [record[f] if f != "data" else orjson.dumps(record[f]).decode() for f in EXPORT_FIELDS]
                        )
                        if csv_format
                        else orjson.dumps(record) + b"\n"
                    )
                if len(batch) < size:
                    return
                cursor = (batch[-1].stored_at, batch[-1].id)
                if left is not None:
                    left -= len(batch)

        mimetype = "text/csv" if csv_format else "application/x-ndjson"
        return Response(
            stream_with_context(rows()),
            mimetype=mimetype,
            headers={
                "X-Consistent-Through": through.isoformat(timespec="milliseconds"),
                "Content-Disposition": f"attachment; filename=events.{'csv' if csv_format else 'ndjson'}",
            },
        )


def _export_record(row: Any) -> dict[str, Any]:
    """The learner-events shape, with text timestamps (CSV needs them) and the row's resume cursor."""
    record = event_json(row)
    record["occurred_at"] = row.occurred_at.isoformat()
    record["stored_at"] = row.stored_at.isoformat()
    record["cursor"] = cursors.encode(f"{row.stored_at.isoformat()}|{row.id}")
    return record


def _csv_line(values) -> bytes:
    buffer = io.StringIO()
    csv.writer(buffer).writerow(["" if v is None else v for v in values])
    return buffer.getvalue().encode()


def _decode_row(cursor: str) -> tuple[dt.datetime, int]:
    text = cursors.decode(cursor, "after")
    try:
        stored, row = text.split("|")
        when = dt.datetime.fromisoformat(stored)
        if when.tzinfo is None:
            raise ValueError
        return when, int(row)
    except ValueError:
        raise cursors.invalid("after") from None
