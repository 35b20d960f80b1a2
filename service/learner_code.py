"""Running a learner's exercise file on this machine (the CLI's `exercise check` and `submit`).

Nothing here runs on the server: the service only ever sees the numbers a learner's code made.
"""

from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from .compute.diagnose import PARTS


class LearnerCodeError(Exception):
    """The learner's file could not be loaded, or their function raised or returned the wrong thing."""


def load(path: str | Path):
    """The `multi_head_attention` function defined in the learner's file."""
    spec = importlib.util.spec_from_file_location("learner_exercise", Path(path))
    if spec is None or spec.loader is None:
        raise LearnerCodeError(f"{path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the learner's module body: report what it raised
        raise LearnerCodeError(f"importing {path} raised {type(exc).__name__}: {exc}") from None
    function = getattr(module, "multi_head_attention", None)
    if not callable(function):
        raise LearnerCodeError(f"{path} defines no multi_head_attention(tokens, heads, causal=True, ...)")
    return function


def run(function, case: dict[str, Any]) -> dict[str, np.ndarray]:
    """The learner's outputs for one case, as float arrays (NaN kept: the checker names it)."""
    kwargs = {"causal": case["causal"]}
    if case.get("output_projection") is not None:
        kwargs["output_projection"] = case["output_projection"]
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # NaN is named by the checker, not warned about
            result = function(case["tokens"], case["heads"], **kwargs)
    except Exception as exc:  # the learner's code: anything it raises is their result
        hint = ""
        if isinstance(exc, FloatingPointError) and case["causal"]:
            hint = (
                ". That is usually a row of scores that is all -inf, so its softmax divides 0 by 0: is the "
                "diagonal masked too? A token must attend to itself (mask j > i, not j >= i)"
            )
        raise LearnerCodeError(f"your multi_head_attention raised {type(exc).__name__}: {exc}{hint}") from None
    if not isinstance(result, dict):
        raise LearnerCodeError(f"multi_head_attention must return a dict, got {type(result).__name__}")
    try:
        return {p: np.asarray(result[p], dtype=float) for p in PARTS if p in result}
    except (TypeError, ValueError) as exc:
        raise LearnerCodeError(f"the result's values must be arrays of numbers: {exc}") from None


def to_json(values: np.ndarray) -> Any:
    """Nested lists with NaN (and infinities) as null: JSON has no NaN, and the checker names a null."""
    return _nulls(np.asarray(values, dtype=float))


def _nulls(array: np.ndarray) -> Any:
    if array.ndim == 0:
        value = float(array)
        return value if np.isfinite(value) else None
    return [_nulls(row) for row in array]
