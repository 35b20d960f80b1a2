"""Schemas of progress events, learners and lessons."""

from __future__ import annotations

import datetime as dt
import re
import uuid
from collections.abc import Callable
from typing import Any

import orjson
from flask import current_app
from marshmallow import Schema, ValidationError, fields, post_load, pre_load, validate
from marshmallow import missing as marshmallow_missing

from ..problems import Problem
from .fields import SafeString, UTCDateTime

EVENT_KINDS = ("started", "attempted", "completed", "parameter-changed")
SERVER_OWNED = ("stored_at", "platform", "platform_id", "content_hash", "seq", "status")
MAX_DATA_BYTES = 8192
MAX_DATA_DEPTH = 6
FUTURE_TOLERANCE = dt.timedelta(minutes=5)
OLDEST = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)


def name(max_length: int) -> validate.Regexp:
    """One validator for length and alphabet (marshmallow runs each validator separately)."""
    return validate.Regexp(
        rf"^[A-Za-z0-9][A-Za-z0-9._:@-]{{0,{max_length - 1}}}$",
        error=f"1 to {max_length} characters: letters, digits and . _ : @ - only",
    )


def _deeper_than(value, limit: int) -> bool:
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
    if _deeper_than(value, MAX_DATA_DEPTH):  # first: the size check below recurses
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


class Doubt(Exception):
    """The fast loader is not sure: marshmallow decides (and words the error)."""


_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _load_uuid(value: Any) -> str:
    if type(value) is not str:
        raise Doubt
    if _CANONICAL_UUID.fullmatch(value):
        return value  # str(uuid.UUID(value)) is value itself
    return str(uuid.UUID(value))  # ValueError: marshmallow's "Not a valid UUID."


def _load_time(value: Any) -> dt.datetime:
    if type(value) is not str:
        raise Doubt
    moment = dt.datetime.fromisoformat(value)  # what marshmallow 4's DateTime("iso") calls
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise Doubt
    return moment.astimezone(dt.UTC)  # OverflowError: outside years 1 to 9999


def _load_string(value: Any) -> str:
    if type(value) is not str or "\x00" in value:
        raise Doubt
    return value


def _load_data(value: Any) -> dict:
    """`validate_data`'s three rules, decided from one encoding: NUL shows as \\u0000 in it (a
    false alarm, a literal backslash-u, only sends the event to marshmallow), and containers
    can nest deeper than the limit only if it holds more opening brackets than the limit."""
    if type(value) is not dict:
        raise Doubt
    encoded = orjson.dumps(value)  # TypeError (an int past 64 bits): marshmallow decides
    if len(encoded) > MAX_DATA_BYTES or b"\\u0000" in encoded:
        raise Doubt
    if encoded.count(b"{") + encoded.count(b"[") > MAX_DATA_DEPTH and _deeper_than(value, MAX_DATA_DEPTH):
        raise Doubt
    return dict(value)


def _plan(schema: Schema) -> list[tuple[str, Any, bool, bool, Any, list]]:
    """Per declared field: name, loader, required, allow_none, default, the validators still to
    run (the data rules are the loader's own), in declaration order."""
    steps = []
    for name, field in schema.declared_fields.items():
        validators = list(field.validators)
        load: Callable[[Any], Any]
        if isinstance(field, fields.UUID):
            load = _load_uuid
        elif isinstance(field, UTCDateTime):
            load = _load_time
        elif isinstance(field, SafeString):
            load = _load_string
        elif isinstance(field, fields.Dict) and validators == [validate_data]:
            load, validators = _load_data, []
        else:
            raise TypeError(f"the fast loader does not know field {name!r} ({type(field).__name__})")
        steps.append((name, load, field.required, field.allow_none, field.load_default, validators))
    return steps


def fast_load_event(schema: EventSchema, raw: Any) -> dict[str, Any]:
    """`schema.load(raw)` for the common valid event, from the schema's own fields, defaults and
    validators, without marshmallow's per-field machinery (a third of a single event's request).
    Anything it is unsure of raises Doubt, so every accepted body loads exactly as marshmallow
    loads it and every refused one gets marshmallow's error (tests compare both)."""
    if type(raw) is not dict or not raw.keys() <= _EVENT_KEYS:
        raise Doubt  # unknown or server-owned keys: marshmallow names them
    loaded: dict[str, Any] = {}
    for name, load, required, allow_none, default, validators in _EVENT_PLAN:
        value = raw.get(name, marshmallow_missing)
        if value is marshmallow_missing:
            if required:
                raise Doubt
            if default is not marshmallow_missing:
                loaded[name] = default() if callable(default) else default
        elif value is None:
            if not allow_none:
                raise Doubt
            loaded[name] = None
        else:
            value = load(value)
            for validator in validators:
                validator(value)  # ValidationError: marshmallow words it
            loaded[name] = value
    return loaded  # ids are already canonical strings, as EventSchema._normalise makes them


class EventBatchSchema(Schema):
    events = fields.List(
        fields.Nested(EventSchema),
        required=True,
        metadata={"description": "one event may also be sent on its own, without the wrapper"},
    )

    @pre_load
    def _single_or_batch(self, data, **kwargs):
        if isinstance(data, dict) and "events" not in data:
            return {"events": [data]}
        if isinstance(data, dict) and isinstance(data.get("events"), list):
            cap = current_app.extensions["settings"].max_batch_events
            if not data["events"]:
                raise ValidationError({"events": ["must hold at least one event"]})
            if len(data["events"]) > cap:
                raise Problem(
                    413,
                    f"a batch holds at most {cap} events; this one has {len(data['events'])}",
                    errors={"events": [f"at most {cap} events"]},
                    slug="over-limit",
                    extra={"limits": {"max_batch_events": cap}},
                )
        return data

    def load(self, data, *, many=None, partial=None, unknown=None):
        """Valid bodies take `fast_load_event`; anything else, marshmallow's full load."""
        if many is None and partial is None and unknown is None:
            try:
                return {"events": fast_events(data, current_app.extensions["settings"].max_batch_events)}
            except (Doubt, ValidationError, ValueError, OverflowError, TypeError):
                pass
        return super().load(data, many=many, partial=partial, unknown=unknown)


def fast_events(data: Any, cap: int) -> list[dict[str, Any]]:
    """The events of a body (one event, or {"events": [...]} of 1 to `cap`) as EventBatchSchema
    loads them, by `fast_load_event`; Doubt (or the validators' errors) when not sure."""
    if type(data) is dict and "events" in data:
        events = data["events"]
        if len(data) != 1 or type(events) is not list or not 1 <= len(events) <= cap:
            raise Doubt
    else:
        events = [data]
    return [fast_load_event(_EVENT, e) for e in events]


_EVENT = EventSchema()
_EVENT_PLAN = _plan(_EVENT)
_EVENT_KEYS = _EVENT.declared_fields.keys()


class EventStatusSchema(Schema):
    id = fields.String()
    status = fields.String(
        metadata={
            "description": "created | duplicate (identical replay) | erased (acknowledged, "
            "not stored: the learner was erased)"
        }
    )


class CompletionSchema(Schema):
    learner = fields.String()
    lesson = fields.String()
    checkpoint = fields.String()


class EventsResultSchema(Schema):
    created = fields.Integer()
    duplicates = fields.Integer()
    events = fields.List(fields.Nested(EventStatusSchema))
    completed = fields.List(fields.Nested(CompletionSchema), metadata={"description": "checkpoints newly completed"})


class StoredEventSchema(Schema):
    id = fields.String()
    learner = fields.String()
    lesson = fields.String()
    checkpoint = fields.String(allow_none=True)
    event = fields.String()
    instance_id = fields.String(allow_none=True)
    data = fields.Dict()
    occurred_at = fields.DateTime()
    stored_at = fields.DateTime()


class EventPageSchema(Schema):
    events = fields.List(fields.Nested(StoredEventSchema))
    next = fields.String(allow_none=True, metadata={"description": "cursor for the next page, null at the end"})


class PageArgsSchema(Schema):
    limit = fields.Integer(load_default=100, validate=validate.Range(1, 1000))  # query strings: "3" is 3
    cursor = SafeString(load_default=None, validate=validate.Length(1, 64))
