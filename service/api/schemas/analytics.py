"""Schemas of the analytics endpoints (every count over fewer than k learners is null)."""

from __future__ import annotations

from marshmallow import Schema, fields, validate

from ...db import analytics as q
from ...i18n import LOCALES, PSEUDO
from .event import name
from .fields import SafeString, UTCDateTime


class Suppression(Schema):
    k = fields.Integer(metadata={"description": "groups of fewer learners are suppressed (null)"})


class FunnelStepSchema(Schema):
    checkpoint = fields.String()
    title = fields.String()
    learners = fields.Integer(allow_none=True)
    share_of_previous = fields.Float(
        allow_none=True,
        metadata={"description": "of the learners who completed the previous step, the share who completed this one"},
    )
    suppressed = fields.Boolean()
    verified = fields.Integer(
        allow_none=True,
        metadata={"description": "test checkpoints: learners whose numbers the server checked (null: under k)"},
    )
    reported = fields.Integer(
        allow_none=True,
        metadata={"description": "test checkpoints: learners whose platform reported passing tests (null: under k)"},
    )


class FunnelSchema(Suppression):
    lesson = fields.String()
    platform = fields.String(metadata={"description": "the key's platform, whose learners these are"})
    started = fields.Integer(allow_none=True)
    steps = fields.List(fields.Nested(FunnelStepSchema))


class DurationSchema(Schema):
    checkpoint = fields.String()
    learners = fields.Integer(allow_none=True)
    median_seconds = fields.Float(allow_none=True)
    p90_seconds = fields.Float(allow_none=True)
    suppressed = fields.Boolean()


class DurationsSchema(Suppression):
    lesson = fields.String()
    measured_from = fields.String()
    checkpoints = fields.List(fields.Nested(DurationSchema))


class ItemChoiceCountSchema(Schema):
    id = fields.String(metadata={"description": "the choice's id (number items: a response given)"})
    text = fields.String()
    count = fields.Integer(
        allow_none=True, metadata={"description": "learners whose latest answer it is (null: under k)"}
    )
    correct = fields.Boolean()
    misconception = fields.String(allow_none=True, metadata={"description": "what choosing it reveals"})


class ItemStatisticsSchema(Schema):
    id = fields.String()
    phase = fields.String(metadata={"description": "pre or post: an item asked in both has a row for each"})
    kind = fields.String()
    prompt = fields.String()
    learners = fields.Integer(allow_none=True, metadata={"description": "learners who answered it in this phase"})
    correct_rate = fields.Float(allow_none=True, metadata={"description": "share whose latest answer is correct"})
    discrimination = fields.Float(
        allow_none=True,
        metadata={
            "description": "point-biserial: Pearson's r between the item's score and the learner's score on the "
            "phase's other items (null: under k, or no spread)"
        },
    )
    suppressed = fields.Boolean()
    choices = fields.List(fields.Nested(ItemChoiceCountSchema))


class GainSchema(Schema):
    learners = fields.Integer(
        allow_none=True, metadata={"description": "learners who answered every item of both phases"}
    )
    pre_mean = fields.Float(allow_none=True, metadata={"description": "their mean share correct before"})
    post_mean = fields.Float(allow_none=True, metadata={"description": "their mean share correct after"})
    normalized_gain = fields.Float(
        allow_none=True, metadata={"description": "Hake's (post - pre) / (1 - pre) of the means (null: pre is 1)"}
    )
    suppressed = fields.Boolean()


class ItemsSchema(Suppression):
    lesson = fields.String()
    items = fields.List(fields.Nested(ItemStatisticsSchema))
    gain = fields.Nested(GainSchema)


class DateRangeArgs(Schema):
    from_ = UTCDateTime(
        data_key="from",
        load_default=None,
        metadata={"description": "only learners who started the lesson from then (parameters, mistakes: activity)"},
    )
    to = UTCDateTime(load_default=None, metadata={"description": "... and before then"})


class TimeseriesArgs(Schema):
    bucket = SafeString(load_default="day", validate=validate.OneOf(q.BUCKETS))
    group_by = SafeString(load_default="event", validate=validate.OneOf(("event", "checkpoint")))
    from_ = UTCDateTime(data_key="from", load_default=None)
    to = UTCDateTime(load_default=None)
    lesson = SafeString(load_default=None, validate=name(64))


class TimeseriesRowSchema(Schema):
    bucket = fields.String(metadata={"description": "bucket start, UTC"})
    key = fields.String(allow_none=True)
    events = fields.Integer(allow_none=True)
    learners = fields.Integer(allow_none=True)
    suppressed = fields.Boolean()


class TimeseriesSchema(Suppression):
    bucket = fields.String()
    group_by = fields.String()
    rows = fields.List(fields.Nested(TimeseriesRowSchema))


class CountRowSchema(Schema):
    id = fields.String()
    name = fields.String(metadata={"description": "mistakes: the short name from GET /api/v1/failure-modes"})
    description = fields.String()
    times = fields.Integer(allow_none=True)
    learners = fields.Integer(allow_none=True)
    suppressed = fields.Boolean()


class TokenCellSchema(Schema):
    token = fields.Integer(metadata={"description": "1-based, as the learner saw it"})
    dimension = fields.Integer(metadata={"description": "1-based"})
    times = fields.Integer(allow_none=True)
    learners = fields.Integer(allow_none=True)
    suppressed = fields.Boolean()


class ManipulationRowSchema(Schema):
    id = fields.String()
    reports = fields.Integer(allow_none=True, metadata={"description": "events reporting it; null under k"})
    learners = fields.Integer(allow_none=True, metadata={"description": "learners who did it; null under k"})
    suppressed = fields.Boolean()


class ManipulationsSchema(Schema):
    checkpoint = fields.String(metadata={"description": "the checkpoint they complete, all done (its funnel row)"})
    manipulations = fields.List(fields.Nested(ManipulationRowSchema), metadata={"description": "in the lesson's order"})


class ParametersSchema(Suppression):
    lesson = fields.String()
    parameters = fields.List(fields.Nested(CountRowSchema))
    manipulations = fields.Nested(
        ManipulationsSchema,
        allow_none=True,
        metadata={"description": "how far learners got through the lesson's manipulations (null: it lists none)"},
    )
    token_cells = fields.List(
        fields.Nested(TokenCellSchema), metadata={"description": "which token dimensions were edited"}
    )


class MistakeCountsSchema(Suppression):
    lesson = fields.String()
    mistakes = fields.List(fields.Nested(CountRowSchema))


class LearnersArgs(Schema):
    lesson = SafeString(required=True, validate=name(64))
    limit = fields.Integer(load_default=100, validate=validate.Range(1, 1000))
    cursor = SafeString(load_default=None, validate=validate.Length(1, 512))
    locale = SafeString(
        load_default=None,
        validate=validate.OneOf([*LOCALES, PSEUDO]),
        metadata={"description": "only the learners who last read the service in this language"},
    )


class LearnerRowSchema(Schema):
    learner = fields.String()
    locale = fields.String(allow_none=True, metadata={"description": "the language they last read in, or null"})
    started_at = fields.DateTime()
    completed = fields.Dict(keys=fields.String(), values=fields.DateTime())


class LearnersSchema(Suppression):
    lesson = fields.String()
    learners = fields.List(fields.Nested(LearnerRowSchema))
    next = fields.String(allow_none=True)
    suppressed = fields.Boolean(metadata={"description": "fewer than k learners started the lesson: no rows"})


class ExportArgs(Schema):
    format = SafeString(load_default="ndjson", validate=validate.OneOf(("ndjson", "csv")))
    after = SafeString(
        load_default=None, validate=validate.Length(1, 512), metadata={"description": "resume after this row's cursor"}
    )
    limit = fields.Integer(load_default=None, validate=validate.Range(1, 10_000_000))
