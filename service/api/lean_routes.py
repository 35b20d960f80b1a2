"""What the lean path (lean.py) answers, each with the full path's own functions: a route returns
an Answer only for a body it is sure the full path would accept, else None."""

from __future__ import annotations

from typing import Any

from flask import Flask
from marshmallow import ValidationError
from sqlalchemy.exc import TimeoutError as SQLAlchemyTimeout

from ..compute import FAILURE_MODES
from ..db import DatabaseUnavailable
from ..db.events import EventConflict
from .budgets import cost
from .events import record
from .json_codec import InvalidJSON, dumps_bytes, loads_strict
from .lean import Answer, Route, unavailable
from .lean_identity import Caller
from .problems import Problem, database_unavailable
from .schemas.fast_events import NOT_SURE, fast_events
from .schemas.fields import parse_matrix
from .strict_input import caps_exceeded
from .traces import trace_body


class Attention:
    """`POST /api/v1/attention` with what the workbench sends: tokens, heads, causal, failure_mode."""

    max_bytes = 16384  # the workbench sends a few hundred
    needs_principal = False
    fields = frozenset({"tokens", "heads", "causal", "failure_mode"})

    def __init__(self, app: Flask):
        self.settings = app.extensions["settings"]

    def answer(self, raw: bytes, who: Caller) -> Answer | None:
        args = self.arguments(raw)
        if args is None:
            return None
        try:
            return Answer(200, dumps_bytes(trace_body(args, args.get("failure_mode"))))
        except Exception:  # noqa: BLE001 - refused or failed: the full path answers it, in its words
            return None

    def arguments(self, raw: bytes) -> dict[str, Any] | None:
        """The arguments AttentionRequestSchema would load, for bodies this path is sure of:
        within the caps the full path checks first, and charged to no budget."""
        try:
            data = loads_strict(raw)
        except InvalidJSON:
            return None
        if not isinstance(data, dict) or not data.keys() <= self.fields or caps_exceeded(data, self.settings):
            return None
        heads, causal, mode = data.get("heads"), data.get("causal", True), data.get("failure_mode")
        try:
            tokens = parse_matrix(data.get("tokens"))
        except ValidationError:
            return None
        if (
            type(heads) is not int
            or heads < 1
            or type(causal) is not bool
            or not (mode is None or (type(mode) is str and mode in FAILURE_MODES))
        ):
            return None
        args = {"tokens": tokens, "heads": heads, "causal": causal, "failure_mode": mode}
        if cost(args) >= min(self.settings.compute_free_cells, self.settings.heavy_compute_cells):
            return None  # charged to a budget, or computed in the background process: the full path
        return args


class Events:
    """`POST /api/v1/events`: one event or a batch, from a caller this worker already knows."""

    max_bytes = 1 << 22  # settings.max_content_length decides below that
    needs_principal = True

    def __init__(self, app: Flask):
        self.settings = app.extensions["settings"]
        self.db = app.extensions["db"]
        self.lessons = app.extensions["lessons"]

    def answer(self, raw: bytes, who: Caller) -> Answer | None:
        if who.principal is None or "events:write" not in who.principal.scopes:
            return None
        try:
            events = fast_events(loads_strict(raw), self.settings.max_batch_events)
            status, body = record(who.principal, events, self.lessons, self.db)
        except (InvalidJSON, *NOT_SURE, Problem, EventConflict):
            return None  # before anything was stored (a conflict rolls its batch back): the full path words it
        except (DatabaseUnavailable, SQLAlchemyTimeout) as error:  # without waiting for the database again
            return unavailable(database_unavailable(error))
        return Answer(status, dumps_bytes(body))


def routes(app: Flask) -> dict[str, Route]:
    return {"/api/v1/attention": Attention(app), "/api/v1/events": Events(app)}
