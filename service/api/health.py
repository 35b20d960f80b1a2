"""Liveness and readiness probes (outside the versioned API): `GET /healthz`, `GET /readyz`."""

from flask import Blueprint, current_app, jsonify

from ..db import DatabaseUnavailable
from ..edge.problems import Problem
from ..observability import operator

blp = Blueprint("health", __name__)


@blp.get("/healthz")
def healthz():
    """The process is alive (no dependency is consulted)."""
    return jsonify(status="ok")


def needed_room(settings) -> int:
    """What one maximal request may write (its body four times over: the rows, their index
    entries, the WAL's copy) and the configured margin: a search engine's flood-stage watermark."""
    return 4 * settings.max_content_length + settings.ready_margin_bytes


def _room_for_a_request(free: int | None, settings) -> None:
    if free is not None and free < needed_room(settings):
        raise DatabaseUnavailable(
            f"{free:,} bytes free where the database is, under the {needed_room(settings):,} one maximal request "
            "may need with the margin (WORKBENCH_READY_MARGIN_BYTES)"
        )


@blp.get("/readyz")
def readyz():
    """Ready: the database answers and takes a write that needs room (503 with Retry-After
    otherwise: it does not answer, its disk is full, it is read-only). An operator (the metrics
    token, else loopback) also reads why, and whether rate limits are shared; anyone else reads
    only whether it is ready."""
    db, settings = current_app.extensions["db"], current_app.extensions["settings"]
    try:
        db.ping()
        db.takes_writes()
        _room_for_a_request(db.free_bytes(), settings)
    except DatabaseUnavailable as exc:
        detail = f"the database does not take writes: {exc}" if operator() else "not ready"
        raise Problem(503, detail, headers={"Retry-After": "2"}, slug="not-ready") from None
    if not operator():
        return jsonify(status="ready")
    if not current_app.extensions["limits"].storage_ok():  # serving, but limits are per worker until it is back
        return jsonify(status="degraded", database="ok", rate_limits="shared store unreachable: limited per worker")
    shared = not current_app.extensions["settings"].ratelimit_storage_uri.startswith("memory://")
    return jsonify(status="ready", database="ok", rate_limits="shared" if shared else "per worker (memory://)")
