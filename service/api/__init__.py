"""HTTP edge: strict JSON, problem+json errors, one blueprint per resource under /api/v1."""

from __future__ import annotations

from flask import Flask
from flask_cors import CORS

from . import (
    analytics,
    attention,
    budgets,
    challenges,
    docs,
    events,
    exercises,
    exports,
    failure_modes,
    health,
    lean,
    lean_routes,
    learners,
    lessons,
    models,
    presets,
    problems,
    session,
    slow_clients,
    strict_input,
    xapi,
)
from .auth import init_limiter
from .json_codec import OrjsonProvider
from .smorest import Api

# One blueprint per resource, in the order the OpenAPI document lists them.
RESOURCES = (
    attention,
    presets,
    failure_modes,
    models,
    lessons,
    events,
    learners,
    session,
    exercises,
    challenges,
    analytics,
    exports,
    xapi,
)


def init_app(app: Flask) -> Api:
    settings = app.extensions["settings"]
    app.json_provider_class = OrjsonProvider
    app.json = OrjsonProvider(app)
    app.config.update(
        API_TITLE="Multi-head attention workbench",
        API_VERSION="1.0",
        OPENAPI_VERSION="3.0.3",
        OPENAPI_URL_PREFIX="/api/v1",
        OPENAPI_JSON_PATH="openapi.json",
        API_SPEC_OPTIONS={
            "info": {
                "description": "Compute multi-head attention with every intermediate, read the lesson, "
                "record and analyse learner progress. Errors are application/problem+json (RFC 9457). "
                "Numerical conventions: see each response's `conventions` block.",
            },
        },
    )
    api = Api(app)
    problems.init_app(app)
    for module in RESOURCES:
        api.register_blueprint(module.blp)
    app.register_blueprint(health.blp)
    app.register_blueprint(docs.blp)
    CORS(
        app,
        resources={r"/api/v1/*": {"origins": list(settings.cors_origins)}},
        expose_headers=["Retry-After", "Location", "X-Request-Id"],
        supports_credentials=False,
        max_age=600,
    )
    app.before_request(strict_input.refuse_control_characters)
    slow_clients.init_app(app)
    init_limiter(app)
    budgets.init_app(app)  # counts in the limiter's store
    models.init_app(app)
    lean.init_app(app, lean_routes.routes(app))
    app.extensions["api"] = api
    return api
