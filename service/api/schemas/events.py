"""Schemas of the events endpoints: a batch (or one event) in, what was stored out, pages of
stored events. One event's own schema is in event.py."""

from __future__ import annotations

from flask import current_app
from marshmallow import Schema, ValidationError, fields, pre_load, validate

from ...edge.problems import Problem
from .event import EventSchema
from .fast_events import NOT_SURE, fast_events
from .fields import SafeString


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
        """Valid bodies take the fast loader (fast_events.py); anything else, marshmallow's full load."""
        if many is None and partial is None and unknown is None:
            try:
                return {"events": fast_events(data, current_app.extensions["settings"].max_batch_events)}
            except NOT_SURE:
                pass
        try:
            return super().load(data, many=many, partial=partial, unknown=unknown)
        except ValidationError as error:
            nested = error.messages.get("events") if isinstance(error.messages, dict) else None
            if isinstance(data, dict) and "events" not in data and isinstance(nested, dict) and 0 in nested:
                raise ValidationError(nested[0]) from None  # one event sent alone: its own field names
            raise


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
    item = fields.String(allow_none=True, metadata={"description": "answered events: the item answered"})
    data = fields.Dict()
    occurred_at = fields.DateTime()
    stored_at = fields.DateTime()


class EventPageSchema(Schema):
    events = fields.List(fields.Nested(StoredEventSchema))
    next = fields.String(allow_none=True, metadata={"description": "cursor for the next page, null at the end"})


class PageArgsSchema(Schema):
    limit = fields.Integer(load_default=100, validate=validate.Range(1, 1000))  # query strings: "3" is 3
    cursor = SafeString(load_default=None, validate=validate.Length(1, 64))
