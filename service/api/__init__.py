"""The JSON API: one blueprint per resource under /api/v1, problem+json errors, the OpenAPI
document. The edge in front of it (service/edge) identifies, counts and reads each request."""

from __future__ import annotations

from typing import Any

from flask import Flask

from ..edge import problems
from ..edge.json_codec import OrjsonProvider


def resources() -> tuple:
    """One blueprint per resource, in the order the OpenAPI document lists them. Imported when the
    app is made, not with this package: the background compute process imports
    service.api.attention.offload and must not load every resource (and numpy) before it has
    become a background one."""
    from . import (
        analytics,
        challenges,
        cmi5,
        events,
        exercises,
        exports,
        failure_modes,
        kv_cache,
        learners,
        lessons,
        models,
        presets,
        rope,
        session,
        speculative,
        xapi,
    )
    from .attention import views as attention

    return (
        attention,
        kv_cache,
        rope,
        speculative,
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
        cmi5,
    )


def init_app(app: Flask) -> Any:
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
    from . import auth, docs, health, models
    from .smorest import Api

    api = Api(app)
    for name, scheme in auth.SCHEMES.items():
        if scheme.get("in") == "cookie":  # `__Host-` prefixed when served over https
            scheme = {**scheme, "name": app.config["SESSION_COOKIE_NAME"]}
        api.spec.components.security_scheme(name, scheme)
    problems.init_app(app)
    for module in resources():
        api.register_blueprint(module.blp)
    app.register_blueprint(health.blp)
    app.register_blueprint(docs.blp)
    models.init_app(app)
    app.extensions["api"] = api
    return api
