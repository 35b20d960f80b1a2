"""flask-smorest wired for this service: problem+json errors, and the body parser reading the
JSON the edge already read and parsed (strict: service/edge/body.py)."""

from __future__ import annotations

import http
from collections.abc import Callable
from typing import Any

import flask
import flask_smorest
import marshmallow as ma
from flask import request
from flask_smorest.utils import prepare_response
from webargs import core
from webargs.flaskparser import FlaskParser

from ..edge import JSON, RAW
from ..edge.body import parse_json
from ..edge.problems import PROBLEM_MIMETYPE, Problem, http_problem
from .schemas.fields import SAFE_INTEGER, Matrix


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


# What the marshmallow schemas cannot say themselves, said in the document (issue 40: the document
# is the server): strings in paths, queries and headers hold no control character (the edge
# refuses a URL with one), and members that exclude each other.
CONTROL_FREE = "^[^\\u0000-\\u001F\\u007F]*$"
ANALYTICS_YEARS = "^(19|2[0-2])[0-9]{2}-"  # a date in a query: 1900 to 2299, what every analytics store holds
EXCLUSIVE = {  # component -> members a request may not send together
    "AttentionRequest": ["latent", "kv_heads"],
    "CompareRequest": ["latent", "kv_heads"],
    "DecodeRequest": ["latent", "kv_heads"],
    "CacheRequest": ["latent", "kv_heads"],
}
NOT_EMPTY = ("Output",)  # components a request must send at least one member of (the checker needs one)


def _exclusive_bounds(self, field, **kwargs) -> dict:
    """OpenAPI 3.0's boolean exclusiveMinimum/Maximum for a Range that leaves its bound out
    (apispec writes the bound alone, which would let the bound itself through)."""
    found: dict[str, bool] = {}
    for validator in getattr(field, "validators", []):
        if isinstance(validator, ma.validate.Range):
            if validator.min is not None and not validator.min_inclusive:
                found["exclusiveMinimum"] = True
            if validator.max is not None and not validator.max_inclusive:
                found["exclusiveMaximum"] = True
    return found


def _safe_integer(self, field, **kwargs) -> dict:
    """A StrictInteger's bounds: its Range, else the I-JSON range it refuses beyond."""
    if type(field).__name__ != "StrictInteger":
        return {}
    ranges = [v for v in getattr(field, "validators", []) if isinstance(v, ma.validate.Range)]
    bounds: dict[str, int] = {}
    if not any(r.max is not None for r in ranges):
        bounds["maximum"] = SAFE_INTEGER
    if not any(r.min is not None for r in ranges):
        bounds["minimum"] = -SAFE_INTEGER
    return bounds


def _text_schema(self, field, **kwargs) -> dict:
    """A model's text: at least one character, no control character but tab, newline, return."""
    if type(field).__name__ == "Text":
        return {"minLength": 1, "pattern": "^[^\\u0000-\\u0008\\u000B\\u000C\\u000E-\\u001F\\u007F-\\u009F]*$"}
    return {}


class Api(flask_smorest.Api):
    ERROR_SCHEMA = ProblemSchema

    def _init_spec(self, **kwargs):
        super()._init_spec(**kwargs)
        for function in (_matrix_schema, _exclusive_bounds, _safe_integer, _text_schema):
            self.ma_plugin.converter.add_attribute_function(function)

    def document(self) -> dict:
        """The OpenAPI document as served: the spec, with what the schemas cannot say added."""
        spec = self.spec.to_dict()
        for item in spec.get("paths", {}).values():
            operations = [op for method, op in item.items() if method != "parameters"]
            for parameter in item.get("parameters", []) + [p for op in operations for p in op.get("parameters", [])]:
                schema = parameter.get("schema", {})
                if schema.get("type") == "string" and not schema.keys() & {"pattern", "enum", "format"}:
                    schema["pattern"] = CONTROL_FREE
                elif schema.get("format") == "date-time":
                    schema["pattern"] = ANALYTICS_YEARS
        schemas = spec.get("components", {}).get("schemas", {})
        for schema in schemas.values():
            for name, member in schema.get("properties", {}).items():
                alternatives = member.get("anyOf", [])  # apispec's "or null" admits any object: null alone
                if len(alternatives) == 2 and alternatives[0] == {"type": "object", "nullable": True}:
                    schema["properties"][name] = {"nullable": True, "allOf": [alternatives[1]]}
        for name, members in EXCLUSIVE.items():
            if name in schemas:
                schemas[name]["not"] = {"required": members}
        for name in NOT_EMPTY:
            if name in schemas:
                schemas[name]["minProperties"] = 1
        self._caps(schemas)
        lesson = schemas.get("Event", {}).get("properties", {}).get("lesson")
        if lesson is not None:  # the lessons this server has
            lesson["enum"] = sorted(self._app.extensions["lessons"])
        return spec

    def _caps(self, schemas: dict) -> None:
        """This server's caps (its settings) as the bounds of what it computes: tokens at most
        max_tokens rows of at most max_d_model numbers, heads and kv_heads at most max_heads, a prefill
        and a tile's sides at most max_tokens."""
        settings = self._app.extensions["settings"]
        for name in ("AttentionRequest", "CompareRequest", "DecodeRequest", "TiledRequest", "Case"):
            properties = schemas.get(name, {}).get("properties", {})
            if "tokens" in properties:
                properties["tokens"]["maxItems"] = settings.max_tokens
                properties["tokens"]["items"]["maxItems"] = settings.max_d_model
            for member in ("heads", "kv_heads", "prefill", "block_q", "block_k"):
                if member in properties:
                    cap = settings.max_heads if member.endswith("heads") else settings.max_tokens
                    properties[member]["maximum"] = min(properties[member].get("maximum", cap), cap)
        for name in ("Projections", "Latent"):  # every matrix at most max_d_model rows and columns
            for matrix in schemas.get(name, {}).get("properties", {}).values():
                if matrix.get("type") == "array" and "items" in matrix:
                    matrix["maxItems"] = matrix["items"]["maxItems"] = settings.max_d_model

    def _openapi_json(self):
        return flask.current_app.response_class(
            flask.json.dumps(self.document(), indent=2), mimetype="application/json"
        )

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
