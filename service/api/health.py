"""Liveness and readiness probes (outside the versioned API)."""

from flask import Blueprint, current_app, jsonify

from ..db import DatabaseUnavailable
from ..edge.problems import Problem

blp = Blueprint("health", __name__)


@blp.get("/healthz")
def healthz():
    """The process is alive (no dependency is consulted)."""
    return jsonify(status="ok")


@blp.get("/readyz")
def readyz():
    """The database answers (503 with Retry-After otherwise); the rate limiter's store answers (degraded otherwise)."""
    try:
        current_app.extensions["db"].ping()
    except DatabaseUnavailable as exc:
        raise Problem(
            503, f"the database does not answer: {exc}", headers={"Retry-After": "2"}, slug="database-unavailable"
        ) from None
    if not current_app.extensions["limits"].storage_ok():  # serving, but limits are per worker until it is back
        return jsonify(status="degraded", database="ok", rate_limits="shared store unreachable: limited per worker")
    return jsonify(status="ready", database="ok", rate_limits="ok")
