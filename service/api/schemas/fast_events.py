"""The fast loader of progress events: `EventBatchSchema.load` for the common valid body, built
from EventSchema's own fields, defaults and validators, without marshmallow's per-field
machinery (a third of a single event's request). Whatever it is not sure of raises one of
NOT_SURE, and marshmallow decides and words the error (tests compare both)."""

from __future__ import annotations

import datetime as dt
import re
import uuid
from collections.abc import Callable
from typing import Any

import orjson
from marshmallow import Schema, ValidationError, fields
from marshmallow import missing as marshmallow_missing

from .event import MAX_DATA_BYTES, MAX_DATA_DEPTH, EventSchema, deeper_than, validate_data
from .fields import Doubt, SafeString, UTCDateTime

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
    if encoded.count(b"{") + encoded.count(b"[") > MAX_DATA_DEPTH and deeper_than(value, MAX_DATA_DEPTH):
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
    """`schema.load(raw)` for the common valid event. Anything it is unsure of raises Doubt, so
    every accepted body loads exactly as marshmallow loads it and every refused one gets
    marshmallow's error."""
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


# Everything the fast loader raises when it is not sure (the validators and the standard
# library's parsers raise the last four): the caller hands the body to marshmallow.
NOT_SURE = (Doubt, ValidationError, ValueError, OverflowError, TypeError)

_EVENT = EventSchema()
_EVENT_PLAN = _plan(_EVENT)
_EVENT_KEYS = _EVENT.declared_fields.keys()
