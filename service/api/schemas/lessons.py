"""Schemas of lessons: metadata, checkpoints and their completion rules, parsed blocks."""

from __future__ import annotations

from marshmallow import Schema, fields


class CheckpointRuleSchema(Schema):
    id = fields.String()
    title = fields.String()
    completion = fields.String()
    on = fields.Dict()
    requires = fields.String(allow_none=True)
    prediction = fields.String(
        metadata={"description": "a prediction the engine judges after the experiment (progress says whether it held)"}
    )
    min_words = fields.Integer(
        metadata={"description": "text checkpoints that earn their completion: the fewest words (a CJK character: one)"}
    )
    vocabulary = fields.Dict(
        keys=fields.String(),
        values=fields.List(fields.String()),
        metadata={"description": "language -> the lesson's words; the text uses at least one, of any language"},
    )


class ItemChoiceSchema(Schema):
    id = fields.String()
    text = fields.String()


class ItemSchema(Schema):
    id = fields.String()
    phase = fields.String(metadata={"description": "pre, post or both: when it is asked"})
    kind = fields.String(metadata={"description": "choice (respond with a choice id) or number"})
    prompt = fields.String()
    choices = fields.List(fields.Nested(ItemChoiceSchema), metadata={"description": "choice items"})


class LessonSummarySchema(Schema):
    id = fields.String()
    locale = fields.String(
        metadata={"description": "the language it is in: en, es or zh-CN (English where not translated)"}
    )
    title = fields.String()
    order = fields.Integer()
    summary = fields.String()
    objectives = fields.List(fields.String())
    prerequisites = fields.List(fields.String(), metadata={"description": "lesson ids"})
    prerequisite_titles = fields.List(
        fields.String(),
        metadata={"description": "each prerequisite's title, in the same order"},
    )
    prerequisites_present = fields.List(
        fields.Boolean(), metadata={"description": "whether each prerequisite is a lesson here (/lessons/{id})"}
    )
    checkpoints = fields.List(fields.Nested(CheckpointRuleSchema))


class LessonListSchema(Schema):
    lessons = fields.List(fields.Nested(LessonSummarySchema))


class BlockSchema(Schema):
    class Meta:
        unknown = "include"

    kind = fields.String()
    markdown = fields.String()
    html = fields.String()
    questions = fields.List(fields.String())
    answers = fields.List(
        fields.String(allow_none=True), metadata={"description": "self-check: each question's model answer, or null"}
    )


class LessonSchema(LessonSummarySchema):
    items = fields.List(
        fields.Nested(ItemSchema),
        metadata={
            "description": "questions with known answers, answered as events (event 'answered'); their keys "
            "and misconceptions are never shown before an answer"
        },
    )
    markdown = fields.String()
    html = fields.String()
    blocks = fields.List(
        fields.Dict(),
        metadata={
            "description": "predict, answer, explorable, exercise, explain, items, self-check blocks "
            "with their attributes"
        },
    )
