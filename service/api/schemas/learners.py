"""Schemas of a learner's progress, erasure and browser session."""

from __future__ import annotations

from marshmallow import Schema, fields

from .event import name
from .fields import SafeString


class ProgressArgsSchema(Schema):
    lesson = SafeString(load_default=None, validate=name(64))


class JudgedPredictionSchema(Schema):
    choice = fields.String(allow_none=True, metadata={"description": "what the learner predicted"})
    observed = fields.String(
        allow_none=True,
        metadata={"description": "what the engine computed on the learner's own edit, once they made it"},
    )
    held = fields.Boolean(
        allow_none=True, metadata={"description": "whether the prediction held (null: not yet known)"}
    )


class CheckpointStateSchema(Schema):
    id = fields.String()
    title = fields.String()
    completed = fields.Boolean()
    completed_at = fields.DateTime(allow_none=True)
    verification = fields.String(
        allow_none=True, metadata={"description": "test checkpoints: verified (challenge) or reported (platform)"}
    )
    response = fields.String(
        allow_none=True,
        metadata={"description": "text checkpoints: the learner's latest recorded text (their own words)"},
    )
    prediction = fields.Nested(JudgedPredictionSchema, metadata={"description": "prediction checkpoints"})
    manipulations = fields.List(
        fields.String(),
        metadata={
            "description": "checkpoints completed by a set of manipulations: the ones done so far, in the "
            "lesson's order (the checkpoint completes when all are done)"
        },
    )


class ItemAnswerSchema(Schema):
    item = fields.String()
    phase = fields.String()
    response = fields.Raw(metadata={"description": "the latest response: a choice id or a number; null when skipped"})
    skipped = fields.Boolean(
        metadata={"description": "true when the learner passed over the question before the workbench"}
    )
    answered_at = fields.DateTime()
    correct = fields.Boolean(
        metadata={"description": "absent while the item is still to be asked again after the workbench"}
    )
    misconception = fields.String(allow_none=True, metadata={"description": "what a wrong choice reveals"})
    answer = fields.Raw(metadata={"description": "the right answer, once this answer is scored for the learner"})
    working = fields.String(allow_none=True, metadata={"description": "how a number item's answer is reached"})


class LessonProgressSchema(Schema):
    lesson = fields.String()
    title = fields.String()
    completed = fields.Integer()
    total = fields.Integer()
    checkpoints = fields.List(fields.Nested(CheckpointStateSchema))
    items = fields.List(
        fields.Nested(ItemAnswerSchema), metadata={"description": "the latest answer to each item in each phase"}
    )


class ProgressSchema(Schema):
    learner = fields.String()
    locale = fields.String(
        allow_none=True,
        metadata={"description": "the language the learner last read the service in (BCP 47: en, es, zh-CN), or null"},
    )
    lessons = fields.List(fields.Nested(LessonProgressSchema))


class ErasureSchema(Schema):
    learner = fields.String()
    erased = fields.Dict(keys=fields.String(), values=fields.Integer())
    replays = fields.String(metadata={"description": "what happens to later replays of the erased event ids"})


class SessionSchema(Schema):
    learner = fields.String()
    platform = fields.String()
    course = fields.Boolean(
        metadata={"description": "an instructor launched from a course (LTI): /lti/course lists it"}
    )
