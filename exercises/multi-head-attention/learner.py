"""Run your multi_head_attention on a case and check what it returns: a message for every slip.

Only the standard library and numpy. The tests, submit.py and trace.py all call your code
through this file, so a missing head axis, a list of strings, a NaN or an exception in your
code reads the same everywhere (the words are in tests/messages.json, shared with the
TypeScript track).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import traceback
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
MESSAGES = json.loads((HERE / "tests" / "messages.json").read_text(encoding="utf-8"))  # English: every key
FUNCTION = "multi_head_attention"
SIGNATURE = "multi_head_attention(tokens, heads, causal=True, output_projection=None)"
RETURNS = "a dict of weights, head_outputs, concatenated and output"
# part -> its axes, as the README writes them
AXES = {
    "weights": "[H][n][n]",
    "head_outputs": "[H][n][d_head]",
    "concatenated": "[n][d_model]",
    "output": "[n][d_model]",
}


class LearnerError(Exception):
    """Your file could not be loaded, or your function raised or returned something unusable."""


def language() -> str:
    """The messages' language: MHA_LANG (or `pytest --lang`), else the locale (LC_ALL, LC_MESSAGES,
    LANG, as the C library reads them): es, zh-CN (Simplified), or English."""
    for name in ("MHA_LANG", "LC_ALL", "LC_MESSAGES", "LANG"):
        tag = os.environ.get(name, "").split(".")[0].replace("_", "-").lower()
        if not tag:
            continue
        if tag.startswith("zh") and not any(part in ("tw", "hk", "mo", "hant") for part in tag.split("-")):
            return "zh-CN"
        return "es" if tag.split("-")[0] == "es" else "en"
    return "en"


def messages(lang: str) -> dict:
    """The messages in `lang`: its translation (tests/messages.<lang>.json) over the English, so a
    key it lacks reads in English."""
    path = HERE / "tests" / f"messages.{lang}.json"
    return {**MESSAGES, **json.loads(path.read_text(encoding="utf-8"))} if path.is_file() else MESSAGES


def say(key: str, **values) -> str:
    """The shared message `key` with its blanks filled in, in the learner's language."""
    return messages(language())[key].format(**values)


def fmt(values) -> str:
    return "[" + ", ".join(f"{v:.3g}" for v in np.ravel(values)) + "]"


def describe(case: dict) -> str:
    n, d_model = len(case["tokens"]), len(case["tokens"][0])
    mask = "causal" if case.get("causal", True) else "no mask"
    projection = ", with W_O" if case.get("output_projection") is not None else ""
    return f"{n} token{'' if n == 1 else 's'} of width {d_model}, {case['heads']} heads, {mask}{projection}"


def load(path: str | Path):
    """The multi_head_attention your file defines. Its folder is importable, so a helper module
    beside it can be imported."""
    path = Path(path).resolve()
    if not path.is_file():
        raise LearnerError(say("no_file", path=path))
    if path.suffix != ".py":
        raise LearnerError(say("not_source", path=path, language="Python (.py)"))
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(f"learner_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the learner's module body: report what it raised, where
        raise LearnerError(say("import_raised", path=path, error=_error(exc), where=_where(exc, path))) from None
    function = getattr(module, FUNCTION, None)
    if not callable(function):
        names = sorted(
            n
            for n, v in vars(module).items()
            if callable(v) and not n.startswith("_") and v.__module__ == module.__name__
        )
        found = say("found_functions", names=", ".join(names)) if names else ""
        raise LearnerError(say("no_function", path=path, function=FUNCTION, signature=SIGNATURE, found=found))
    return function


def expected_shapes(case: dict) -> dict[str, tuple[int, ...]]:
    n, d_model, heads = len(case["tokens"]), len(case["tokens"][0]), case["heads"]
    d_head = d_model // heads
    return {
        "weights": (heads, n, n),
        "head_outputs": (heads, n, d_head),
        "concatenated": (n, d_model),
        "output": (n, d_model),
    }


def call(function, case: dict) -> dict[str, np.ndarray]:
    """Your function's four parts for `case` (tokens, heads, causal, optional output_projection),
    as float arrays of the right shapes; NaN is kept (see `nan_problem`)."""
    arrays = outputs(function, case)
    problems = shape_problems(arrays, case)
    if problems:
        raise LearnerError("; ".join(problems))
    return arrays


def outputs(function, case: dict) -> dict[str, np.ndarray]:
    """Your function's four parts for `case` as float arrays, whatever their shapes."""
    kwargs = {"causal": case.get("causal", True)}
    if case.get("output_projection") is not None:
        kwargs["output_projection"] = case["output_projection"]
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # NaN is named below, not warned about
            result = function(case["tokens"], case["heads"], **kwargs)
    except TypeError as exc:
        if "output_projection" in kwargs and "output_projection" in str(exc):
            raise LearnerError(
                say("no_projection_parameter", function=FUNCTION, parameter="output_projection", error=exc)
            ) from None
        raise LearnerError(_raised(exc, case, _source(function))) from None
    except Exception as exc:  # the learner's code: anything it raises is their result
        raise LearnerError(_raised(exc, case, _source(function))) from None
    if not isinstance(result, dict):
        raise LearnerError(say("not_a_dict", function=FUNCTION, returns=RETURNS, type=type(result).__name__))
    missing = [p for p in AXES if p not in result]
    if missing:
        raise LearnerError(say("missing_parts", parts=", ".join(missing), all=", ".join(AXES)))
    arrays = {}
    for part in AXES:
        try:
            arrays[part] = np.asarray(result[part], dtype=float)
        except (TypeError, ValueError) as exc:
            raise LearnerError(say("not_numbers", part=part, error=_plain(exc))) from None
    return arrays


def shape_problems(arrays: dict[str, np.ndarray], case: dict) -> list[str]:
    """One message per part whose shape is wrong, with what it looks like went wrong."""
    problems = []
    for part, want in expected_shapes(case).items():
        got = arrays[part].shape
        if got != want:
            problems.append(
                say(
                    "wrong_shape",
                    part=part,
                    got=list(got),
                    axes=AXES[part],
                    want=list(want),
                    case=describe(case),
                    hint=_shape_hint(got, want),
                )
            )
    return problems


def _shape_hint(got: tuple[int, ...], want: tuple[int, ...]) -> str:
    if len(want) == 3 and got == want[1:]:
        return say("hint_missing_head_axis")
    if len(got) == len(want) and got == want[::-1]:
        return say("hint_transposed")
    if len(want) == 3 and got == (want[1], want[0], want[2]):
        return say("hint_heads_last")
    if len(got) == len(want) and len(got) >= 2 and got[-2] != want[-2]:
        return say("hint_wrong_n", n=want[-2])
    return ""


def nan_problem(arrays: dict[str, np.ndarray], case: dict) -> str | None:
    """Where the first NaN is, named; a masked diagonal is named as the mistake it is."""
    for part, values in arrays.items():
        if np.isnan(values).any():
            where = [int(t) + 1 for t in np.argwhere(np.isnan(values))[0]]
            names = ("head", "query", "key") if values.ndim == 3 else ("query", "feature")
            at = ", ".join(f"{name} {i}" for name, i in zip(names, where, strict=False))
            diagonal = part == "weights" and case.get("causal", True) and np.isnan(values[:, 0]).all()
            return say("nan_diagonal" if diagonal else "nan", part=part, where=at, case=describe(case))
    return None


def _source(function) -> Path | None:
    filename = getattr(getattr(function, "__code__", None), "co_filename", None)
    return Path(filename) if filename else None


def _raised(exc: BaseException, case: dict, path: Path | None) -> str:
    hint = say("raised_floating_point") if isinstance(exc, FloatingPointError) and case.get("causal", True) else ""
    return say("raised", function=FUNCTION, error=_error(exc), where=_where(exc, path), case=describe(case), hint=hint)


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {_plain(exc)}" if str(exc) else type(exc).__name__


def _plain(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def _where(exc: BaseException, path: Path | None) -> str:
    """' (line 12 of my_attention.py: x.reshape(...))': the last place in the learner's own
    folder the exception passed, so they know where to look without reading a traceback."""
    folder = (path.parent if path else None) or Path.cwd()
    frames = [
        f for f in traceback.extract_tb(exc.__traceback__) if _inside(f.filename, folder) and f.filename != __file__
    ]
    if isinstance(exc, SyntaxError) and exc.filename and exc.lineno:
        return f" (line {exc.lineno} of {Path(exc.filename).name})"
    if not frames:
        return ""
    frame = frames[-1]
    code = f": {frame.line.strip()}" if frame.line else ""
    return f" (line {frame.lineno} of {Path(frame.filename).name}{code})"


def _inside(filename: str, folder: Path) -> bool:
    try:
        return Path(filename).resolve().is_relative_to(folder.resolve())
    except (OSError, ValueError):
        return False
