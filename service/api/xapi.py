"""xAPI 1.0.3 views of a platform's events: `GET /xapi/statements`, `GET /xapi/about`.

This service is a Learning Record Provider: it serves its own statements and forwards them to
the platform's LRS; it does not accept statements.
"""

from __future__ import annotations

import datetime as dt
import urllib.parse
from typing import Any

import orjson
from flask import current_app, request, url_for
from flask.views import MethodView

from ..edge.problems import Problem
from ..xapi import queries as statements_db
from ..xapi import statements as xapi
from . import cursors
from .auth import authorized, needs
from .schemas.xapi import AboutSchema, StatementResultSchema, StatementsArgs
from .smorest import Blueprint

blp = Blueprint(
    "xapi", __name__, url_prefix="/api/v1/xapi", description="The platform's events as xAPI 1.0.3 statements."
)
HEADER = "X-Experience-API-Version"
VERSION_PARAMETER = {  # xAPI 1.0.3 section 6.2: every request says the version it speaks
    "in": "header",
    "name": HEADER,
    "required": True,
    "description": "The xAPI version the client speaks: 1.0.x",
    "schema": {"type": "string", "pattern": "^1\\.0(\\.[0-9]+)?$", "example": "1.0.3"},
}


def _require_version() -> None:
    version = request.headers.get(HEADER)
    if version is None:
        raise _version_problem(f"xAPI requests carry the {HEADER} header (1.0.x)", "required")
    if not version.startswith("1.0"):
        raise _version_problem(
            f"unsupported xAPI version {version!r}; this service speaks {xapi.VERSION}", "unsupported"
        )


def _version_problem(detail: str, error: str) -> Problem:
    return Problem(400, detail, errors={HEADER: [error]}, headers={HEADER: xapi.VERSION}, slug="xapi-version")


@blp.route("/about")
class About(MethodView):
    @blp.response(200, AboutSchema)
    def get(self):
        """The xAPI versions this provider speaks"""
        return current_app.response_class(
            orjson.dumps(
                {
                    "version": [xapi.VERSION],
                    "extensions": {
                        "https://attention-workbench.example/xapi/extensions/role": "learning record provider"
                    },
                }
            ),
            mimetype="application/json",
            headers={HEADER: xapi.VERSION},
        )


@blp.route("/statements")
class Statements(MethodView):
    @needs("analytics:read", web=False, basic=True)
    @blp.arguments(StatementsArgs(), location="query")
    @blp.doc(parameters=[VERSION_PARAMETER])
    @blp.response(200, StatementResultSchema)
    @blp.problems(400, 401, 403, 422, 429, 503)
    def get(self, args):
        """The platform's events as xAPI statements (Bearer or Basic auth with the platform's key)"""
        _require_version()
        principal = authorized()
        settings = current_app.extensions["settings"]
        db = current_app.extensions["db"]
        with db.read() as session:
            home_page = statements_db.home_page(session, principal.platform_id)
            learner = None
            if args["agent"] is not None:
                page, learner = args["agent"]
                if page != home_page:
                    return self._empty()
            lesson = checkpoint = None
            if args["activity"] is not None:
                lesson, checkpoint = _parse_activity(args["activity"], settings.activity_base)
            where = statements_db.StatementFilter(
                learner, args["since"], args["until"], lesson, checkpoint, args["ascending"]
            )
            after = _row_cursor(args["cursor"]) if args["cursor"] else None
            page_of = _Page(session, principal.platform_id, home_page, args["verb"], args["limit"] or 1000)
            statements, last_id, exhausted = page_of.read(where, after)
        more = ""
        if not exhausted and last_id is not None:
            params = {k: v for k, v in request.args.items() if k != "cursor"}
            params["cursor"] = cursors.encode(str(last_id))
            more = url_for("xapi.Statements", _external=False) + "?" + urllib.parse.urlencode(params)
        consistent = dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        return current_app.response_class(
            orjson.dumps({"statements": statements, "more": more}),
            mimetype="application/json",
            headers={HEADER: xapi.VERSION, "X-Experience-API-Consistent-Through": consistent},
        )

    def _empty(self):
        return current_app.response_class(
            orjson.dumps({"statements": [], "more": ""}), mimetype="application/json", headers={HEADER: xapi.VERSION}
        )


class _Page:
    """One page of statements: the verb is computed, not stored, so rows are read and mapped, then
    filtered by verb, until the page is full or the events run out."""

    def __init__(self, session: Any, platform_id: int, home_page: str, verb: str | None, limit: int):
        self.session, self.platform_id, self.home_page, self.verb, self.limit = (
            session,
            platform_id,
            home_page,
            verb,
            limit,
        )

    def read(self, where: Any, after: int | None) -> tuple[list[dict[str, Any]], Any, bool]:
        """The page's statements, the last row read and whether none is left."""
        settings, lessons = current_app.extensions["settings"], current_app.extensions["lessons"]
        statements: list[dict[str, Any]] = []
        last_id, exhausted, limit = None, False, self.limit
        while len(statements) < limit and not exhausted:
            rows = statements_db.events_page(self.session, self.platform_id, where, after, limit * 2)
            bodies = xapi.statements_of(
                self.session, self.platform_id, rows, self.home_page, settings.activity_base, lessons
            )
            exhausted = len(rows) < limit * 2
            for row, body in zip(rows, bodies, strict=True):
                last_id = row.id
                if self.verb is None or body["verb"]["id"] == self.verb:
                    statements.append(body)
                    if len(statements) == limit:
                        exhausted = exhausted and row is rows[-1]
                        break
            if rows:
                after = last_id
        return statements, last_id, exhausted


def _row_cursor(cursor: str) -> int:
    return cursors.row_id(cursors.decode(cursor))


def _parse_activity(iri: str, base: str) -> tuple[str, str | None]:
    prefix = base.rstrip("/") + "/lessons/"
    if not iri.startswith(prefix):
        raise Problem(400, f"activity IRIs of this provider start with {prefix}", errors={"activity": ["unknown"]})
    lesson, _, rest = iri[len(prefix) :].partition("/checkpoints/")
    return lesson, (rest or None)
