"""Schemas of the exercise: checks of one output, and challenges with their answers."""

from __future__ import annotations

from typing import Any

import numpy as np
from marshmallow import Schema, ValidationError, fields, pre_load, validate

from ...edge.problems import Problem
from .event import name
from .fields import Matrix, SafeString, StrictBoolean, StrictInteger, described

MAX_N, MAX_D = 32, 64  # exercise-sized cases
MAX_ANSWER_CELLS = 4096  # challenge cases are at most 6 tokens x 8: generous, still tiny
MAX_CHECK_CELLS = MAX_D * MAX_N * MAX_N  # the weights of the largest case /check takes


class Numbers(fields.Field):
    """A rectangular nested list of numbers with at most `ndim` axes; null stands for NaN (JSON has
    none). The shape is checked against the case later, where the expected one can be named."""

    def __init__(self, ndim: int, cells: int = MAX_ANSWER_CELLS, **kwargs: Any):
        about = f"up to {ndim}-d nested lists of numbers; null for NaN"
        super().__init__(**{**kwargs, "metadata": {"description": about, **kwargs.get("metadata", {})}})
        self.ndim, self.cells = ndim, cells

    def _deserialize(self, value, attr, data, **kwargs) -> np.ndarray:
        cells: list[float] = []
        shape = _shape(value, self.ndim, cells, "", self.cells)
        return np.array(cells, dtype=np.float64).reshape(shape)


def _shape(value: Any, ndim: int, cells: list[float], where: str, most: int) -> tuple[int, ...]:
    if value is None or type(value) in (int, float):
        cells.append(np.nan if value is None else float(value))
        return ()
    if not isinstance(value, list):
        raise ValidationError(f"{where or 'the value'} must be a number, null or a list, got {described(value)}")
    if ndim == 0:
        raise ValidationError(f"{where or 'the value'} nests lists too deep: at most 3 axes")
    if not value:
        raise ValidationError(f"{where or 'the value'} must be a non-empty list, got an empty list")
    if len(cells) + len(value) > most:
        raise ValidationError(f"an answer holds at most {most} numbers")
    shapes = {_shape(item, ndim - 1, cells, f"{where}[{i}]", most) for i, item in enumerate(value)}
    if len(shapes) != 1:
        raise ValidationError(f"{where or 'the value'} is not rectangular: its items differ in shape")
    return (len(value), *shapes.pop())


class CaseSchema(Schema):
    tokens = Matrix(required=True)
    heads = StrictInteger(required=True, validate=validate.Range(min=1, max=MAX_D))
    causal = StrictBoolean(load_default=True)


class OutputSchema(Schema):
    weights = Numbers(3, cells=MAX_CHECK_CELLS, metadata={"description": "[H][n][n]"})
    head_outputs = Numbers(3, cells=MAX_CHECK_CELLS, metadata={"description": "[H][n][d_head]"})
    concatenated = Numbers(3, cells=MAX_CHECK_CELLS, metadata={"description": "[n][d_model]"})


class CheckSchema(Schema):
    case = fields.Nested(CaseSchema, required=True)
    output = fields.Nested(OutputSchema, required=True)
    learner = SafeString(
        validate=name(128),
        metadata={"description": "platform keys: whose check this is (browser sessions: always the session's learner)"},
    )

    @pre_load
    def _small_cases_only(self, data, **kwargs):
        tokens = (
            data.get("case", {}).get("tokens")
            if isinstance(data, dict) and isinstance(data.get("case"), dict)
            else None
        )
        if isinstance(tokens, list) and (
            len(tokens) > MAX_N or (tokens and isinstance(tokens[0], list) and len(tokens[0]) > MAX_D)
        ):
            raise Problem(
                413,
                f"exercise cases are at most {MAX_N} tokens of width {MAX_D}",
                errors={"case.tokens": [f"at most {MAX_N} x {MAX_D}"]},
                slug="over-limit",
                extra={"limits": {"tokens": MAX_N, "d_model": MAX_D}},
            )
        return data


class CheckResultSchema(Schema):
    correct = fields.Boolean()
    max_abs_error = fields.Float()
    diagnosis = fields.String(
        allow_none=True,
        metadata={"description": "the mistake's id when the output shows exactly one known mistake, else null"},
    )
    mistakes = fields.List(fields.String(), metadata={"description": "every known mistake the output shows"})
    message = fields.String()
    recorded = fields.Boolean(metadata={"description": "stored for the identified learner"})


class MistakesSchema(Schema):
    mistakes = fields.Dict(keys=fields.String(), values=fields.String())


class ChallengeAnswerSchema(Schema):
    weights = Numbers(3, required=True)
    head_outputs = Numbers(3, required=True)
    concatenated = Numbers(3, required=True)
    output = Numbers(3, required=True)


def answer_per_case(answer: type[Schema]) -> fields.List:
    return fields.List(
        fields.Nested(answer),
        required=True,
        validate=validate.Length(min=1, max=8),
        metadata={"description": "one answer per case, in the challenge's order"},
    )


class AnswersSchema(Schema):
    answers = answer_per_case(ChallengeAnswerSchema)


class OnlineAnswerSchema(Schema):
    output = Numbers(2, required=True, metadata={"description": "[n][d]: diag(l)^-1 O~"})
    lse = Numbers(1, required=True, metadata={"description": "[n]: each row's log-sum-exp L = m + log l"})


class OnlineAnswersSchema(Schema):
    answers = answer_per_case(OnlineAnswerSchema)


class NewChallengeSchema(Schema):
    learner = SafeString(
        validate=name(128),
        metadata={"description": "platform keys: whose challenge this is (browser sessions: always their own)"},
    )


class ChallengeCaseSchema(Schema):
    tokens = fields.List(fields.List(fields.Float()))
    heads = fields.Integer(metadata={"description": "multi-head cases"})
    causal = fields.Boolean()
    output_projection = fields.List(fields.List(fields.Float()), allow_none=True)
    block_q = fields.Integer(metadata={"description": "online-softmax cases: one head, Q = K = V = tokens"})
    block_k = fields.Integer(metadata={"description": "online-softmax cases"})


class CaseVerdictSchema(Schema):
    case = fields.Integer(metadata={"description": "1-based"})
    correct = fields.Boolean()
    max_abs_error = fields.Float()
    mistakes = fields.List(fields.String())
    message = fields.String()


class VerdictSchema(Schema):
    correct = fields.Boolean()
    mistakes = fields.List(fields.String(), metadata={"description": "every mistake named in any case"})
    message = fields.String()
    cases = fields.List(fields.Nested(CaseVerdictSchema))
    completed = fields.Boolean(metadata={"description": "this answer completed the learner's checkpoint"})


class ChallengeSchema(Schema):
    id = fields.String()
    lesson = fields.String()
    checkpoint = fields.String()
    status = fields.String(metadata={"description": "open, solved or expired"})
    cases = fields.List(fields.Nested(ChallengeCaseSchema))
    created_at = fields.DateTime()
    expires_at = fields.DateTime()
    attempts = fields.Integer()
    answers_url = fields.String()
    result = fields.Nested(VerdictSchema, allow_none=True, metadata={"description": "the latest verdict"})


class OnlineCaseSchema(Schema):
    tokens = Matrix(required=True, metadata={"description": "[n][d]: Q = K = V = tokens, one head"})
    causal = StrictBoolean(load_default=True)
    block_q = StrictInteger(required=True, validate=validate.Range(min=1, max=MAX_N))
    block_k = StrictInteger(required=True, validate=validate.Range(min=1, max=MAX_N))


class OnlineOutputSchema(Schema):
    output = Numbers(2, required=True, metadata={"description": "[n][d]: diag(l)^-1 O~"})
    lse = Numbers(1, metadata={"description": "[n]: each row's log-sum-exp L = m + log l"})


class OnlineCheckSchema(CheckSchema):
    """The online-softmax exercise's check: the same body's form, its own case and output."""

    case = fields.Nested(OnlineCaseSchema, required=True)
    output = fields.Nested(OnlineOutputSchema, required=True)
