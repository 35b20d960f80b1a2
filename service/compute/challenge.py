"""Exercise challenges: fresh random cases, and the verdict on a learner's answers to them.

Pure numpy, like the rest of `service.compute`: the API stores and serves the cases, the
learner's own code computes the answers on their machine, and `check_answers` compares them
with the engine case by case, naming any recognised mistake (see `diagnose`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .diagnose import PARTS, Diagnosis, diagnose
from .errors import AttentionInputError

# (d_model, heads): every case has at least two heads of width at least two, so each known
# mistake (interleaving, reuse, scale, concatenation order) changes the numbers.
SHAPES = ((4, 2), (6, 3), (8, 2), (8, 4), (6, 2))
# Which mistakes each case can show: a causal case with W_O, a causal case without, an
# unmasked case with W_O. Together they reveal every mistake the checker knows.
KINDS = ((True, True), (True, False), (False, True))


def new_cases(rng: np.random.Generator) -> list[dict[str, Any]]:
    """Three small random cases (JSON-ready), one of each KIND."""
    cases = []
    for causal, projected in KINDS:
        d_model, heads = SHAPES[int(rng.integers(len(SHAPES)))]
        n = int(rng.integers(3, 7))
        case: dict[str, Any] = {
            "tokens": rng.uniform(-2, 2, size=(n, d_model)).round(2).tolist(),  # [n, d_model]
            "heads": heads,
            "causal": causal,
        }
        if projected:
            case["output_projection"] = rng.uniform(-1, 1, size=(d_model, d_model)).round(2).tolist()
        cases.append(case)
    return cases


def describe(case: dict[str, Any]) -> str:
    n, d_model = len(case["tokens"]), len(case["tokens"][0])
    mask = "causal" if case["causal"] else "no mask"
    projection = ", with W_O" if case.get("output_projection") is not None else ""
    return f"{n} tokens of width {d_model}, {case['heads']} heads, {mask}{projection}"


@dataclass(frozen=True)
class Verdict:
    correct: bool
    cases: tuple[Diagnosis, ...]

    @property
    def mistakes(self) -> list[str]:
        """Every mistake named in any case, in first-seen order."""
        return list(dict.fromkeys(m for d in self.cases for m in d.mistakes))

    def message(self, cases: list[dict[str, Any]]) -> str:
        if self.correct:
            return f"All {len(cases)} cases match the reference: your implementation is verified."
        i, wrong = next((i, d) for i, d in enumerate(self.cases) if not d.correct)
        return f"Case {i + 1} ({describe(cases[i])}): {wrong.message}"


def check_answers(cases: list[dict[str, Any]], answers: list[dict[str, np.ndarray]]) -> Verdict:
    """Diagnose each answer against its case. Raises AttentionInputError (field `answers.i.part`)
    when an answer has the wrong shape."""
    verdicts = []
    for i, (case, answer) in enumerate(zip(cases, answers, strict=True)):
        output = {p: answer[p] for p in PARTS if p in answer}
        try:
            verdicts.append(
                diagnose(
                    case["tokens"],
                    case["heads"],
                    case["causal"],
                    output,
                    output_projection=case.get("output_projection"),
                )
            )
        except AttentionInputError as exc:
            part = (exc.field or "output").removeprefix("output").lstrip(".")
            raise AttentionInputError(
                f"answer {i + 1}: {exc}", field=f"answers.{i}" + (f".{part}" if part else "")
            ) from None
    return Verdict(all(v.correct for v in verdicts), tuple(verdicts))
