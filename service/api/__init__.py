"""HTTP edge: strict JSON, problem+json errors, one blueprint per resource under /api/v1."""

from __future__ import annotations

from flask import Flask

from . import errors, health
from .jsonio import OrjsonProvider


def init_app(app: Flask) -> None:
    app.json_provider_class = OrjsonProvider
    app.json = OrjsonProvider(app)
    errors.init_app(app)
    app.register_blueprint(health.blp)
