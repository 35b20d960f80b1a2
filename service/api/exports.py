"""`GET /analytics/events/export`: every event of a platform once, streamed (NDJSON or CSV) in
(stored time, id) order, resumable from any row's cursor."""

from __future__ import annotations

import csv
import datetime as dt
import io
from typing import Any

import orjson
from flask import Response, current_app, stream_with_context
from flask.views import MethodView

from ..db.progress import event_json
from ..db.stores import store_of
from . import cursors
from .auth import authorized, needs
from .schemas.analytics import ExportArgs
from .smorest import AUTH_ERRORS, Blueprint

blp = Blueprint(
    "exports",
    __name__,
    url_prefix="/api/v1/analytics",
    description="Every event of a platform's own learners, streamed and resumable (scope analytics:read).",
)

EXPORT_FIELDS = (
    "id",
    "learner",
    "lesson",
    "checkpoint",
    "event",
    "instance_id",
    "item",  # answered events: the lesson's item
    "data",
    "learner_locale",  # the language the learner last read in (their current one, not the event's)
    "occurred_at",
    "stored_at",
    "cursor",
)


PAGE = 2000


@blp.route("/events/export")
class Export(MethodView):
    @needs("analytics:read", web=False)
    @blp.arguments(ExportArgs(), location="query")
    @blp.response(200, content_type="application/x-ndjson", description="One event per line (or CSV rows)")
    @blp.doc(
        responses={
            200: {
                "content": {
                    "application/x-ndjson": {
                        "schema": {"type": "string", "description": "format=ndjson: one JSON event per line"}
                    },
                    "text/csv": {
                        "schema": {"type": "string", "description": "format=csv: a header row, then one row per event"}
                    },
                }
            }
        }
    )
    @blp.problems(400, 422, *AUTH_ERRORS)
    def get(self, args):
        """Every event of the platform once, streamed in (stored time, id) order, resumable"""
        principal = authorized()
        after = _decode_row(args["after"]) if args["after"] else None
        settle = current_app.extensions["settings"].export_settle_seconds
        store = store_of(current_app)
        through = store.through(dt.datetime.now(dt.UTC)) - dt.timedelta(seconds=settle)
        csv_format = args["format"] == "csv"

        def rows():
            cursor, left = after, args["limit"]
            if csv_format:
                yield _csv_line(EXPORT_FIELDS)
            while left is None or left > 0:
                size = PAGE if left is None else min(PAGE, left)
                with store.reading() as conn:
                    batch = conn.export_page(principal.platform_id, cursor, through, size)
                    languages = conn.locales_of(principal.platform_id, (row.learner for row in batch))
                for row in batch:
                    record = _export_record(row, languages.get(row.learner))
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


def _export_record(row: Any, locale: str | None) -> dict[str, Any]:
    """The learner-events shape, with the learner's language, text timestamps (CSV needs them) and
    the row's resume cursor."""
    record = event_json(row)
    record["learner_locale"] = locale
    record["occurred_at"] = row.occurred_at.isoformat()
    record["stored_at"] = row.stored_at.isoformat()
    record["cursor"] = cursors.encode(f"{row.stored_at.isoformat()}|{row.id}")
    return record


def _csv_line(values) -> bytes:
    buffer = io.StringIO()
    csv.writer(buffer).writerow(["" if v is None else v for v in values])
    return buffer.getvalue().encode()


def _decode_row(cursor: str) -> tuple[dt.datetime, int]:
    return cursors.moment_and_row(cursors.decode(cursor, "after"), "after")
