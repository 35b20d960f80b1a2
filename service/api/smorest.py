"""flask-smorest wired for this service: problem+json errors, and the body parser reading the
JSON the edge already read and parsed (strict: service/edge/body.py)."""

from __future__ import annotations

import http
from collections.abc import Callable
from typing import Any

import flask_smorest
import marshmallow as ma
from flask import request
from flask_smorest.utils import prepare_response
from webargs import core
from webargs.flaskparser import FlaskParser

from ..edge import JSON, RAW
from ..edge.body import parse_json
from ..edge.problems import PROBLEM_MIMETYPE, Problem, http_problem
from .schemas.fields import Matrix


def require_json() -> None:
    if not core.is_json(request.mimetype):
        got = request.mimetype or "no Content-Type"
        raise Problem(415, f"send the body as application/json (got {got})", slug="unsupported-media-type")


def json_body() -> Any:
    """The parsed body of a JSON request (read and parsed once, at the edge), or 415."""
    require_json()
    if JSON not in request.environ:
        request.environ[JSON] = parse_json(request.environ.get(RAW, b""))
    return request.environ[JSON]


class StrictParser(FlaskParser):
    """webargs parser whose JSON location is the body the edge parsed."""

    DEFAULT_VALIDATION_STATUS = 422

    def _raw_load_json(self, req):
        return json_body()


class ProblemSchema(ma.Schema):
    """RFC 9457 problem details (documentation only; errors are built by `Problem`)."""

    type = ma.fields.String(metadata={"description": "URI identifying the kind of problem"})
    title = ma.fields.String(metadata={"description": "Short summary of the kind of problem"})
    status = ma.fields.Integer(metadata={"description": "HTTP status code"})
    detail = ma.fields.String(metadata={"description": "What went wrong with this request"})
    errors = ma.fields.Dict(
        keys=ma.fields.String(),
        values=ma.fields.Raw(),
        metadata={"description": "Field name -> messages, for validation errors"},
    )
    limits = ma.fields.Dict(
        keys=ma.fields.String(), values=ma.fields.Integer(), metadata={"description": "The caps a 413 refers to"}
    )

    class Meta:
        unknown = ma.INCLUDE  # problem types may add members (RFC 9457 extensions)


def _matrix_schema(self, field, **kwargs) -> dict:
    """OpenAPI for `Matrix`: a non-empty array of non-empty arrays of numbers."""
    if isinstance(field, Matrix):
        return {"type": "array", "minItems": 1, "items": {"type": "array", "minItems": 1, "items": {"type": "number"}}}
    return {}


class Api(flask_smorest.Api):
    ERROR_SCHEMA = ProblemSchema

    def _init_spec(self, **kwargs):
        super()._init_spec(**kwargs)
        self.ma_plugin.converter.add_attribute_function(_matrix_schema)

    def _register_responses(self):
        for status in http.HTTPStatus:
            response: dict[str, object] = {"description": status.phrase}
            if status >= 400:
                response["schema"] = self.ERROR_SCHEMA
                prepare_response(response, self.spec, PROBLEM_MIMETYPE)
            self.spec.components.response(status.name, response, lazy=True)
        response = {"description": "Error", "schema": self.ERROR_SCHEMA}
        prepare_response(response, self.spec, PROBLEM_MIMETYPE)
        self.spec.components.response("DEFAULT_ERROR", response, lazy=True)

    def handle_http_exception(self, error):
        return http_problem(error).response()


class Blueprint(flask_smorest.Blueprint):
    ARGUMENTS_PARSER = StrictParser()

    def problems(self, *codes: int) -> Callable:
        """Document the error statuses a view can answer with (all problem+json)."""

        def decorator(func):
            for code in codes:
                func = self.alt_response(code, response=http.HTTPStatus(code).name)(func)
            return func

        return decorator


JSON_BODY_ERRORS = (400, 413, 415, 422, 429)
AUTH_ERRORS = (401, 403, 429, 503)  # what any authenticated endpoint may answer besides its own
