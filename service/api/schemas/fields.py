"""Strict marshmallow fields: JSON types mean what they say (no "2" for 2, no true for 1); and
`loader(schema)`, a schema's `load` derived from these fields, defaults and validators for the
bodies it is sure of (the fast handlers at the edge): whatever it is not sure of raises `Doubt`,
and marshmallow decides and words the error. tests/api/test_event_schema.py holds the two together."""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Callable
from typing import Any

import numpy as np
from marshmallow import Schema, ValidationError, fields
from marshmallow import missing as marshmallow_missing

SAFE_INTEGER = 2**53 - 1  # RFC 7493 (I-JSON): what every JSON client reads exactly


class StrictInteger(fields.Integer):
    """An integer and only an integer: rejects 1.5, "2", true."""

    def __init__(self, **kwargs: Any):
        super().__init__(strict=True, **kwargs)

    def _deserialize(self, value, attr, data, **kwargs):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValidationError(f"must be an integer, got {described(value)}")
        if abs(value) > SAFE_INTEGER:
            raise ValidationError(f"must be an integer between -{SAFE_INTEGER} and {SAFE_INTEGER} (I-JSON)")
        return super()._deserialize(value, attr, data, **kwargs)


class StrictFloat(fields.Float):
    """A finite JSON number: rejects strings, booleans, NaN and infinities."""

    def __init__(self, **kwargs: Any):
        super().__init__(allow_nan=False, **kwargs)

    def _deserialize(self, value, attr, data, **kwargs):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValidationError(f"must be a number, got {described(value)}")
        if not math.isfinite(value):
            raise ValidationError("must be a finite number")
        return float(value)


class StrictBoolean(fields.Boolean):
    """true or false, nothing truthy."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, bool):
            raise ValidationError(f"must be true or false, got {described(value)}")
        return value


class SafeString(fields.String):
    """A string without NUL bytes (PostgreSQL and most tools cannot hold them)."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, str):
            raise ValidationError(f"must be a string, got {described(value)}")
        if "\x00" in value:
            raise ValidationError("must not contain NUL (\\u0000) characters")
        return super()._deserialize(value, attr, data, **kwargs)


class UTCDateTime(fields.AwareDateTime):
    """An ISO 8601 date-time with a time zone, returned in UTC; one that has no UTC equivalent
    (0001-01-01T00:00+00:01 falls before year 1) is a validation error, not an overflow."""

    EXAMPLE = "2026-12-01T09:30:00Z"

    def _deserialize(self, value, attr, data, **kwargs):
        try:
            moment = super()._deserialize(value, attr, data, **kwargs)
        except ValidationError:
            zoneless = isinstance(value, str) and _parses_without_zone(value)
            raise ValidationError(
                f"must name its time zone (Z or an offset such as +01:00), as in {self.EXAMPLE}, got {described(value)}"
                if zoneless
                else f"must be an ISO 8601 date-time with a time zone, such as {self.EXAMPLE}, got {described(value)}"
            ) from None
        try:
            return moment.astimezone(dt.UTC)
        except OverflowError:
            raise ValidationError("is outside the range of dates that can be stored (years 1 to 9999 in UTC)") from None


def _parses_without_zone(value: str) -> bool:
    try:
        return dt.datetime.fromisoformat(value).tzinfo is None
    except ValueError:
        return False


class Matrix(fields.Field):
    """A non-empty rectangular matrix of finite numbers, returned as a float64 array.

    Checked row by row with plain type tests (microseconds for thousands of numbers),
    not one marshmallow field per number. `shape` fixes the expected [rows, cols].
    """

    def __init__(self, **kwargs: Any):
        metadata = kwargs.pop("metadata", {})
        metadata.setdefault("description", "rows of numbers, all rows the same length")
        super().__init__(metadata=metadata, **kwargs)

    def _deserialize(self, value, attr, data, **kwargs) -> np.ndarray:
        return parse_matrix(value)

    def _serialize(self, value, attr, obj, **kwargs):
        return None if value is None else np.asarray(value).tolist()


_NUMBER_TYPES = {int, float}


def parse_matrix(value: Any) -> np.ndarray:
    if not isinstance(value, list) or not value:
        raise ValidationError(f"must be a non-empty list of rows, got {described(value)}")
    width = None
    for i, row in enumerate(value):
        if not isinstance(row, list) or not row:
            raise ValidationError(
                f"row {i + 1} (counting from 1) must be a non-empty list of numbers, got {described(row)}"
            )
        if width is None:
            width = len(row)
        elif len(row) != width:
            raise ValidationError(
                f"row {i + 1} (counting from 1) has {len(row)} numbers; row 1 has {width}: rows must be the same length"
            )
        if not set(map(type, row)) <= _NUMBER_TYPES:  # exact types: bool is not a number here
            j, cell = next((j, c) for j, c in enumerate(row) if type(c) not in _NUMBER_TYPES)
            raise ValidationError(
                f"row {i + 1}, column {j + 1} (counting from 1) must be a number, got {described(cell)}"
            )
    matrix = np.array(value, dtype=np.float64)
    if not np.isfinite(matrix).all():  # orjson never yields these; defence for other callers
        i, j = (int(t) for t in np.argwhere(~np.isfinite(matrix))[0])
        raise ValidationError(f"row {i + 1}, column {j + 1} (counting from 1) must be a finite number")
    return matrix


def described(value: Any) -> str:
    """What the caller sent, in words: the value where it is short (`the string "abc"`, `the
    number 3`, `true`), the size where it is not (`an empty list`, `a list of 3 items`)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        if not value:
            return "an empty string"
        shown = value if len(value) <= 24 else value[:24] + "…"
        return "the string " + json.dumps(shown, ensure_ascii=True)
    if isinstance(value, list):
        return "an empty list" if not value else f"a list of {len(value)} item{'s' if len(value) != 1 else ''}"
    if isinstance(value, dict):
        return "an empty object" if not value else f"an object with {len(value)} key{'s' if len(value) != 1 else ''}"
    return type(value).__name__


# -- the fast loader ---------------------------------------------------------------------------


class Doubt(Exception):
    """The fast loader is not sure: marshmallow decides."""


Load = Callable[[Any], Any]


def loader(schema: type[Schema]) -> Load:
    """`schema().load`, for the bodies this is sure of; else raises Doubt."""
    instance = schema()
    plan = [
        (name, field.data_key or name, _field(field), field.required, field.load_default)
        for name, field in instance.load_fields.items()
    ]
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
