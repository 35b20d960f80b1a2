"""The JSON API: one blueprint per resource under /api/v1, problem+json errors, the OpenAPI
document. The edge in front of it (service/edge) identifies, counts and reads each request."""

from __future__ import annotations

from flask import Flask

from ..edge import problems
from ..edge.json_codec import OrjsonProvider
from . import (
    analytics,
    attention,
    auth,
    challenges,
    docs,
    events,
    exercises,
    exports,
    failure_modes,
    health,
    learners,
    lessons,
    models,
    presets,
    session,
    xapi,
)
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
    for name, scheme in auth.SCHEMES.items():
        api.spec.components.security_scheme(name, scheme)
    problems.init_app(app)
    for module in RESOURCES:
        api.register_blueprint(module.blp)
    app.register_blueprint(health.blp)
    app.register_blueprint(docs.blp)
    models.init_app(app)
    app.extensions["api"] = api
    return api
