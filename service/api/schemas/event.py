"""What one progress event is: its fields, their rules, and the data it may carry."""

from __future__ import annotations

import datetime as dt

import orjson
from marshmallow import Schema, ValidationError, fields, post_load, pre_load, validate

from .fields import SafeString, UTCDateTime

EVENT_KINDS = ("started", "attempted", "completed", "parameter-changed", "answered", "skipped")
SERVER_OWNED = ("stored_at", "platform", "platform_id", "content_hash", "seq", "status")
MAX_DATA_BYTES = 8192
MAX_DATA_DEPTH = 6
FUTURE_TOLERANCE = dt.timedelta(minutes=5)
OLDEST = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)


class Whole(validate.Regexp):
    """A pattern the whole value must match (re.fullmatch: "$" alone would let a final newline in).
    Written with ^ and $ so the OpenAPI document's `pattern` is one an ECMA-262 client reads."""

    def __call__(self, value):
        if self.regex.fullmatch(value) is None:
            raise validate.ValidationError(self._format_error(value))
        return value


def name(max_length: int) -> validate.Regexp:
    """One validator for length and alphabet (marshmallow runs each validator separately)."""
    return Whole(
        rf"^[A-Za-z0-9][A-Za-z0-9._:@-]{{0,{max_length - 1}}}$",
        error=f"1 to {max_length} characters: letters, digits and . _ : @ - only",
    )


def deeper_than(value, limit: int) -> bool:
    """Whether containers nest more than `limit` levels; iterative, and stops at the first one
    too deep, so a body nested thousands of levels costs no recursion."""
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if level > limit:
            return True
        stack.extend((child, level + 1) for child in children)
    return False


def _no_nul(value) -> bool:
    if isinstance(value, str):
        return "\x00" not in value
    if isinstance(value, dict):
        return all(_no_nul(k) and _no_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_no_nul(v) for v in value)
    return True


def validate_data(value: dict) -> None:
    if deeper_than(value, MAX_DATA_DEPTH):  # first: the size check below recurses
        raise ValidationError(f"must nest at most {MAX_DATA_DEPTH} levels deep")
    if len(orjson.dumps(value)) > MAX_DATA_BYTES:
        raise ValidationError(f"must encode to at most {MAX_DATA_BYTES} bytes of JSON")
    if not _no_nul(value):
        raise ValidationError("must not contain NUL (\\u0000) characters")


def validate_occurred_at(value: dt.datetime) -> None:
    now = dt.datetime.now(dt.UTC)
    if value > now + FUTURE_TOLERANCE:
        raise ValidationError(
            f"is in the future (more than {int(FUTURE_TOLERANCE.total_seconds() // 60)} "
            "minutes after the server's clock)"
        )
    if value < OLDEST:
        raise ValidationError("is before 2000-01-01")


class EventSchema(Schema):
    id = fields.UUID(required=True, metadata={"description": "client-made UUID: the idempotency key"})
    learner = SafeString(
        validate=name(128),
        metadata={"description": "the platform's pseudonymous learner id (browser sessions: optional)"},
    )
    lesson = SafeString(required=True, validate=name(64))
    checkpoint = SafeString(allow_none=True, load_default=None, validate=name(64))
    event = SafeString(required=True, validate=validate.OneOf(EVENT_KINDS))
    item = SafeString(
        allow_none=True,
        load_default=None,
        validate=name(64),
        metadata={
            "description": "answered events only: the lesson's item answered; data is then "
            '{"response": a choice id or a number, "phase": "pre" or "post"}, scored by the server'
        },
    )
    instance_id = SafeString(allow_none=True, load_default=None, validate=name(128))
    data = fields.Dict(
        keys=fields.String(),
        load_default=dict,
        validate=validate_data,
        metadata={"description": f"event details, at most {MAX_DATA_BYTES} bytes of JSON"},
    )
    occurred_at = UTCDateTime(
        required=True, validate=validate_occurred_at, metadata={"description": "when it happened, with a time zone"}
    )

    @pre_load
    def _server_owned(self, data, **kwargs):
        if isinstance(data, dict):
            owned = {k: ["is set by the server, not the client"] for k in SERVER_OWNED if k in data}
            if owned:
                raise ValidationError(owned)
        return data

    @post_load
    def _normalise(self, data, **kwargs):
        data["id"] = str(data["id"])
        return data
