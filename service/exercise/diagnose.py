"""Name the bug behind a learner's attention output, without running their code.

A learner's `weights`, `head_outputs`, `concatenated` and/or `output` for a case (tokens,
heads, causal, optional output projection; Q = K = V = tokens) are compared with the correct
result, then with what each combination of known mistakes computes. The fewest mistakes that
reproduce the output within the tolerance are the diagnosis. NaN in an output (a masked
diagonal leaves query 1 with nothing to attend to: 0/0) is never correct, and matches the
zeros the checker computes for such a row, so the mistake is still named.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..compute.engine import with_mistakes
from ..compute.errors import AttentionInputError
from ..compute.failure_modes import GROUPS, REGISTRY
from ..text import N_

Say = Callable[..., str]  # say(msgid, **values): the words in some language (service/i18n.py)


def english(msgid: str, /, **values: object) -> str:
    return msgid % values if values else msgid


TOLERANCE = 1e-6

MISTAKES: dict[str, str] = {m.id: m.advice for m in REGISTRY.values()}  # id -> what the learner reads
UNMASKED = (None, "softmax_wrong_axis")  # the masking step's mistakes that show without a mask


NAN_PLACES = {
    "head": N_("head %(index)d"),
    "query": N_("query %(index)d"),
    "key": N_("key %(index)d"),
    "feature": N_("feature %(index)d"),
}


@dataclass(frozen=True)
class Diagnosis:
    correct: bool
    max_abs_error: float
    mistakes: tuple[str, ...]  # every known mistake the output shows (empty: correct, or unknown)
    nan: tuple[str, tuple[tuple[str, int], ...]] | None = None  # the part with NaN, where its first is

    @property
    def diagnosis(self) -> str | None:
        """The mistake's id when the output shows exactly one."""
        return self.mistakes[0] if len(self.mistakes) == 1 else None

    @property
    def message(self) -> str:
        return self.said(english)

    def said(self, say: Say) -> str:
        """What the learner reads, in the language `say` speaks."""
        if self.correct:
            return say(
                N_("Correct: every number matches the engine's within %(tolerance)s."), tolerance=f"{TOLERANCE:g}"
            )
        prefix = ""
        if self.nan:
            part, where = self.nan
            places = ", ".join(say(NAN_PLACES[name], index=i) for name, i in where)
            prefix = say(N_("%(part)s contains NaN (%(where)s). "), part=part, where=places)
        if self.mistakes:
            return prefix + " ".join(say(MISTAKES[m]) for m in self.mistakes)
        return prefix + say(
            N_(
                "Incorrect (largest difference %(error)s), and not a known mistake: run the trace script to see "
                "where your numbers first part from the right ones, or work a small case by hand."
            ),
            error=f"{self.max_abs_error:.3g}",
        )


def expected_outputs(
    tokens, heads: int, causal: bool, *mistakes: str | None, output_projection=None
) -> dict[str, np.ndarray]:
    """What a correct implementation, or one making `mistakes` (any mix of GROUPS), returns.

    Q = K = V = tokens; `output` is `concatenated @ output_projection` (or `concatenated`).
    """
    trace = with_mistakes(tokens, heads, causal, *mistakes, w_o=output_projection)
    return {
        "weights": trace.weights,
        "head_outputs": trace.head_outputs,
        "concatenated": trace.concat,
        "output": trace.output,
    }


PARTS = ("weights", "head_outputs", "concatenated", "output")
AXES = {
    "weights": "[H][n][n]",
    "head_outputs": "[H][n][d_head]",
    "concatenated": "[n][d_model]",
    "output": "[n][d_model]",
}


def _shape_hint(got: tuple[int, ...], want: tuple[int, ...]) -> str:
    """What a wrong shape looks like (the exercise's learner.py says the same to the learner)."""
    if len(want) == 3 and got == want[1:]:
        return " (the head axis is missing: one [n][n] or [n][d_head] block per head)"
    if len(got) == len(want) and got == want[::-1]:
        return " (the axes are the other way round)"
    if len(want) == 3 and got == (want[1], want[0], want[2]):
        return " (the head axis comes first: [H] before the tokens)"
    return ""


def diagnose(tokens, heads: int, causal: bool, output: dict[str, np.ndarray], output_projection=None) -> Diagnosis:
    """Compare `output` (any of PARTS) with the correct result, then with every combination of
    known mistakes; the fewest mistakes that reproduce it win."""
    parts = [p for p in PARTS if p in output]
    if not parts:
        raise AttentionInputError("send at least one of " + ", ".join(PARTS), field="output")
    correct = expected_outputs(tokens, heads, causal, output_projection=output_projection)
    for part in parts:
        shape, want = tuple(np.shape(output[part])), correct[part].shape
        if shape != want:
            raise AttentionInputError(
                f"output.{part} has shape {list(shape)}; for this case it must be {AXES[part]} = {list(want)}"
                + _shape_hint(shape, want),
                field=f"output.{part}",
            )
    got = {p: np.asarray(output[p], dtype=float) for p in parts}
    nan = next((p for p in parts if np.isnan(got[p]).any()), None)
    error = max(max_difference(got[p], correct[p]) for p in parts)
    if nan is None and error <= TOLERANCE:
        return Diagnosis(True, error, ())
    found = (nan, first_nan(got[nan])) if nan else None
    for combo in sorted(_combinations(causal, output_projection is not None), key=len):
        candidate = expected_outputs(tokens, heads, causal, *combo, output_projection=output_projection)
        if all(matches(got[p], candidate[p]) for p in parts):
            return Diagnosis(False, error, combo, found)
    return Diagnosis(False, error, (), found)


def traces_per_diagnosis(causal: bool, projected: bool) -> int:
    """How many traces `diagnose` may compute for one output: the correct one and every combination."""
    return 1 + len(_combinations(causal, projected))


def matches(got: np.ndarray, candidate: np.ndarray) -> bool:
    """Equal within the tolerance, NaN standing for the zeros of a row that sees nothing."""
    return np.allclose(np.nan_to_num(got, nan=0.0), candidate, atol=TOLERANCE, rtol=0)


def max_difference(got: np.ndarray, want: np.ndarray) -> float:
    """The largest difference over the cells that are numbers (NaN is reported by name)."""
    diff = np.abs(got - want)
    finite = diff[np.isfinite(diff)]
    return float(finite.max()) if finite.size else 0.0


def first_nan(values: np.ndarray) -> tuple[tuple[str, int], ...]:
    """Where the first NaN is, 1-based as the lesson counts: (("head", 1), ("query", 1), ("key", 2))."""
    where = [int(t) + 1 for t in np.argwhere(np.isnan(values))[0]]
    names = ("head", "query", "key") if values.ndim == 3 else ("query", "feature")
    return tuple(zip(names, where, strict=False))


def _combinations(causal: bool, projected: bool) -> list[tuple[str, ...]]:
    combos: list[tuple[str, ...]] = [()]
    for group in GROUPS:
        if not causal and group is GROUPS[2]:
            group = UNMASKED  # without the mask only the softmax's axis can go wrong here
        if not projected and group is GROUPS[4]:
            continue  # without W_O skipping it does not show
        combos = [c + ((m,) if m else ()) for c in combos for m in group]
    return [c for c in combos if c]
