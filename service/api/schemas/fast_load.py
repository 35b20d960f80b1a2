"""A schema's `load`, derived from its own fields, defaults and validators, for the bodies it is
sure of: the fast handlers at the edge use it, so a valid body is not taken through
marshmallow's per-field machinery. Whatever it is not sure of raises `Doubt`, and marshmallow
decides (and words the error). tests/api/test_fast_load.py holds the two to the same answers."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from marshmallow import Schema, ValidationError, fields
from marshmallow import missing as marshmallow_missing

from .fields import Matrix, SafeString, StrictBoolean, StrictFloat, StrictInteger, parse_matrix


class Doubt(Exception):
    """The fast loader is not sure: marshmallow decides."""


Load = Callable[[Any], Any]


def loader(schema: type[Schema]) -> Load:
    """`schema().load`, for the bodies this is sure of; else raises Doubt."""
    instance = schema()
    plan = [(name, field.data_key or name, _field(field), field.required, field.load_default)
            for name, field in instance.load_fields.items()]  # fmt: skip
    keys = {key for _, key, *_ in plan}

    def load(data: Any) -> dict[str, Any]:
        if type(data) is not dict or not data.keys() <= keys:
            raise Doubt  # unknown fields: marshmallow refuses them, in its words
        out: dict[str, Any] = {}
        for name, key, load_field, required, default in plan:
            if key in data:
                out[name] = load_field(data[key])
            elif required:
                raise Doubt
            elif default is not marshmallow_missing:
                out[name] = default() if callable(default) else default
        return out

    return load


def _field(field: fields.Field) -> Load:
    base = _base(field)
    checks = list(field.validators)

    def load(value: Any) -> Any:
        if value is None:
            if field.allow_none:
                return None
            raise Doubt
        loaded = base(value)
        for check in checks:
            try:
                check(loaded)
            except ValidationError:
                raise Doubt from None
        return loaded

    return load


def _base(field: fields.Field) -> Load:
    """The type test and conversion of one field, as its `_deserialize` does them."""
    if isinstance(field, Matrix):
        return _matrix
    if isinstance(field, StrictInteger):
        return lambda v: v if type(v) is int else _doubt()
    if isinstance(field, StrictFloat):
        return lambda v: float(v) if type(v) in (int, float) and math.isfinite(v) else _doubt()
    if isinstance(field, StrictBoolean):
        return lambda v: v if type(v) is bool else _doubt()
    if isinstance(field, SafeString):
        return lambda v: v if type(v) is str and "\x00" not in v else _doubt()
    if isinstance(field, fields.Nested) and isinstance(field.nested, type):
        return loader(field.nested)
    if isinstance(field, fields.List):
        inner = _field(field.inner)
        return lambda v: [inner(item) for item in v] if type(v) is list else _doubt()
    return lambda v: _doubt()  # a field this does not know: marshmallow loads it


def _matrix(value: Any) -> Any:
    try:
        return parse_matrix(value)
    except ValidationError:
        raise Doubt from None


def _doubt() -> Any:
    raise Doubt
