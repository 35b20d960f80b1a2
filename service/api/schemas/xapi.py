"""Schemas of the xAPI statement view."""

from __future__ import annotations

import orjson
from marshmallow import Schema, ValidationError, fields, validate

from .fields import UTCDateTime


class AgentField(fields.Field):
    def _deserialize(self, value, attr, data, **kwargs):
        try:
            agent = orjson.loads(value)
            account = agent["account"]
            return str(account["homePage"]), str(account["name"])
        except (orjson.JSONDecodeError, KeyError, TypeError):
            raise ValidationError(
                'must be a JSON agent with an account: {"account": {"homePage": ..., "name": ...}}'
            ) from None


class StatementsArgs(Schema):
    agent = AgentField(load_default=None)
    verb = fields.String(load_default=None, validate=validate.Length(max=512))
    activity = fields.String(load_default=None, validate=validate.Length(max=512))
    since = UTCDateTime(load_default=None)
    until = UTCDateTime(load_default=None)
    limit = fields.Integer(load_default=100, validate=validate.Range(0, 1000))
    ascending = fields.Boolean(load_default=False)
    cursor = fields.String(load_default=None, validate=validate.Length(max=512))


class StatementResultSchema(Schema):
    statements = fields.List(fields.Dict())
    more = fields.String(metadata={"description": "IRL of the next page, empty at the end"})


class AboutSchema(Schema):
    version = fields.List(fields.String())
    extensions = fields.Dict()
