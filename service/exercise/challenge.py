"""Exercise challenges: fresh random cases, and the verdict on a learner's answers to them.

Pure numpy, like the rest of `service.compute`: the API stores and serves the cases, the
learner's own code computes the answers on their machine, and `check_answers` compares them
with the engine case by case, naming any recognised mistake (see `diagnose`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..compute.errors import AttentionInputError
from ..text import N_
from .diagnose import PARTS, Diagnosis, Say, diagnose, english
from .online import diagnose_online, new_online_cases

# (d_model, heads): every case has at least two heads of width at least two, so each known
# mistake (interleaving, reuse, scale, concatenation order) changes the numbers.
SHAPES = ((4, 2), (6, 3), (8, 2), (8, 4), (6, 2))
# Which mistakes each case can show: a causal case with W_O, a causal case without, an
# unmasked case with W_O. Together they reveal every mistake the checker knows.
KINDS = ((True, True), (True, False), (False, True))


def new_cases(rng: np.random.Generator, exercise: str = "multi-head-attention") -> list[dict[str, Any]]:
    """Three small random cases (JSON-ready) of the exercise: the multi-head ones one of each KIND."""
    if exercise == "online-softmax":
        return new_online_cases(rng)
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


def describe(case: dict[str, Any], say: Say = english) -> str:
    n, d_model = len(case["tokens"]), len(case["tokens"][0])
    if "block_q" in case:  # an online-softmax case
        about = say(
            N_("%(n)d tokens of width %(width)d, tiles of %(block_q)d x %(block_k)d"),
            n=n,
            width=d_model,
            block_q=case["block_q"],
            block_k=case["block_k"],
        )
    else:
        about = say(N_("%(n)d tokens of width %(width)d, %(heads)d heads"), n=n, width=d_model, heads=case["heads"])
    mask = say(N_("causal")) if case["causal"] else say(N_("no mask"))
    projection = say(N_(", with W_O")) if case.get("output_projection") is not None else ""
    return f"{about}, {mask}{projection}"


@dataclass(frozen=True)
class Verdict:
    correct: bool
    cases: tuple[Diagnosis, ...]

    @property
    def mistakes(self) -> list[str]:
        """Every mistake named in any case, in first-seen order."""
        return list(dict.fromkeys(m for d in self.cases for m in d.mistakes))

    def message(self, cases: list[dict[str, Any]], say: Say = english) -> str:
        if self.correct:
            return say(
                N_("All %(count)d cases match the engine's numbers: your implementation is verified."), count=len(cases)
            )
        i, wrong = next((i, d) for i, d in enumerate(self.cases) if not d.correct)
        return say(
            N_("Case %(case)d (%(about)s): %(message)s"),
            case=i + 1,
            about=describe(cases[i], say),
            message=wrong.said(say),
        )

    def as_json(self, cases: list[dict[str, Any]], engine_seen: bool = False, say: Say = english) -> dict[str, Any]:
        """The verdict as the API answers and keeps it: the numbers and names, and its words in `say`'s language."""
        return {
            "correct": self.correct,
            "mistakes": self.mistakes,
            "message": self.message(cases, say) + (say(ENGINE_SEEN) if engine_seen else ""),
            "engine_seen": engine_seen,
            "cases": [
                {
                    "case": i + 1,
                    "correct": d.correct,
                    "max_abs_error": d.max_abs_error,
                    "mistakes": list(d.mistakes),
                    "nan": {"part": d.nan[0], "at": [list(p) for p in d.nan[1]]} if d.nan else None,
                    "message": d.said(say),
                }
                for i, d in enumerate(self.cases)
            ],
        }

    @classmethod
    def from_json(cls, kept: dict[str, Any]) -> Verdict:
        """A kept verdict (`as_json`), to say again in another language."""
        diagnoses = tuple(
            Diagnosis(
                c["correct"],
                c["max_abs_error"],
                tuple(c["mistakes"]),
                (c["nan"]["part"], tuple((name, i) for name, i in c["nan"]["at"])) if c.get("nan") else None,
            )
            for c in kept["cases"]
        )
        return cls(kept["correct"], diagnoses)


ENGINE_SEEN = N_(
    " Recorded with a note: these cases were also computed by POST /api/v1/attention while the challenge was "
    "open, so the numbers may be the API's own rather than your code's."
)


def check_answers(cases: list[dict[str, Any]], answers: list[dict[str, np.ndarray]]) -> Verdict:
    """Diagnose each answer against its case. Raises AttentionInputError (field `answers.i.part`)
    when an answer has the wrong shape."""
    verdicts = []
    for i, (case, answer) in enumerate(zip(cases, answers, strict=True)):
        try:
            if "block_q" in case:  # an online-softmax case: its output and each row's L
                blocks = (case["block_q"], case["block_k"])
                verdicts.append(
                    diagnose_online(case["tokens"], case["causal"], *blocks, answer["output"], answer["lse"])
                )
            else:
                output = {p: answer[p] for p in PARTS if p in answer}
                projection = case.get("output_projection")
                verdicts.append(diagnose(case["tokens"], case["heads"], case["causal"], output, projection))
        except AttentionInputError as exc:
            part = (exc.field or "output").removeprefix("output").lstrip(".")
            raise AttentionInputError(
                f"answer {i + 1}: {exc}", field=f"answers.{i}" + (f".{part}" if part else "")
            ) from None
    return Verdict(all(v.correct for v in verdicts), tuple(verdicts))
