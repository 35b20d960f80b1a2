"""Schemas of a cmi5 unit's statements: what its page says of the launch, what the service answers."""

from __future__ import annotations

import json

from marshmallow import INCLUDE, Schema, ValidationError, fields, post_load, validate, validates

from ...xapi.cmi5 import LAUNCH_MODES, MOVE_ON
from .event import Whole, name
from .fields import SafeString, StrictFloat, UTCDateTime

TEMPLATE_BYTES = 16_384  # a context template is a few hundred bytes; a large one is refused, not copied


class AccountSchema(Schema):
    homePage = SafeString(
        required=True,
        validate=Whole(r"^https?://[A-Za-z0-9.:\[\]-]{1,255}(/[!-~]{0,1792})?$", error="an absolute http(s) URL"),
        metadata={"description": "the LMS's own address (an absolute http(s) URL)"},
    )
    name = SafeString(required=True, validate=validate.Length(1, 256))


class AgentSchema(Schema):
    """The launch's actor: an xAPI Agent identified by an account (cmi5 names no other way)."""

    objectType = SafeString(validate=validate.OneOf(["Agent"]))
    name = SafeString(validate=validate.Length(max=256), metadata={"description": "not kept in any statement"})
    account = fields.Nested(AccountSchema, required=True)

    @post_load
    def _agent(self, data, **_):
        return {"objectType": "Agent", "account": data["account"]}


class ContextTemplateSchema(Schema):
    """LaunchData's context template: copied into every statement (its other context properties too)."""

    class Meta:
        unknown = INCLUDE

    contextActivities = fields.Dict(keys=fields.String(), values=fields.List(fields.Dict()))
    extensions = fields.Dict()


class UnitStatementsSchema(Schema):
    lesson = SafeString(required=True, validate=name(64), metadata={"description": "the lesson the unit is"})
    learner = SafeString(
        load_default=None,
        validate=name(128),
        metadata={"description": "a platform's learner (a browser acts for itself)"},
    )
    actor = fields.Nested(AgentSchema, required=True, metadata={"description": "the launch's `actor`"})
    registration = fields.UUID(required=True, metadata={"description": "the launch's `registration`"})
    activityId = SafeString(
        required=True, validate=validate.Length(1, 2048), metadata={"description": "the launch's `activityId`"}
    )
    session = SafeString(
        required=True,
        validate=validate.Length(1, 256),
        metadata={"description": "the session id LaunchData's context template carries (cmi5's sessionid extension)"},
    )
    contextTemplate = fields.Nested(
        ContextTemplateSchema, required=True, metadata={"description": "LaunchData's `contextTemplate`"}
    )
    launchMode = SafeString(required=True, validate=validate.OneOf(LAUNCH_MODES))
    masteryScore = StrictFloat(load_default=None, allow_none=True, validate=validate.Range(0, 1))
    moveOn = SafeString(required=True, validate=validate.OneOf(MOVE_ON))
    initialized = UTCDateTime(
        load_default=None, allow_none=True, metadata={"description": "the session's start, as the first answer said"}
    )

    @validates("contextTemplate")
    def _template(self, value, **_):
        if len(json.dumps(value)) > TEMPLATE_BYTES:
            raise ValidationError(f"at most {TEMPLATE_BYTES} bytes")


class UnitStatementsAnswerSchema(Schema):
    initialized = fields.DateTime(metadata={"description": "the session's start: send it back with every later call"})
    statements = fields.List(
        fields.Dict(), metadata={"description": "the statements due so far, in the order they are sent"}
    )
    terminated = fields.Dict(metadata={"description": "the session's last statement, to stamp and send on leaving"})
