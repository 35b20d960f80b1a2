"""Liveness and readiness probes (outside the versioned API)."""

from flask import Blueprint, current_app, jsonify

from ..db import DatabaseUnavailable
from .problems import Problem

blp = Blueprint("health", __name__)


@blp.get("/healthz")
def healthz():
    """The process is alive (no dependency is consulted)."""
    return jsonify(status="ok")


@blp.get("/readyz")
def readyz():
    """The database answers; 503 with Retry-After otherwise."""
    try:
        current_app.extensions["db"].ping()
    except DatabaseUnavailable as exc:
        raise Problem(
            503, f"the database does not answer: {exc}", headers={"Retry-After": "2"}, slug="database-unavailable"
        ) from None
    return jsonify(status="ready", database="ok")
