"""Name the bug behind a learner's attention output, without running their code.

A learner's `weights` and/or `concatenated` for a case (tokens, heads, causal; Q = K = V =
tokens, no projections) are compared with the correct result, then with what each known
mistake computes. The first mistake that reproduces the output within the tolerance is the
diagnosis.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import ops
from .engine import multi_head_attention
from .errors import AttentionInputError

TOLERANCE = 1e-6

MISTAKES: dict[str, str] = {
    "interleaved_split": "Head h took features h, h+H, h+2H, ...: the split must give each head a contiguous "
    "slice (head 1 features 0..d_head-1, head 2 the next d_head, ...).",
    "reuse_first_slice": "Every head read the first slice of features: each head must read its own slice, "
    "otherwise the other features never reach attention.",
    "no_scaling": "The scores were not divided by sqrt(d_head) before the softmax.",
    "scale_by_d_model": "The scores were divided by sqrt(d_model); each head divides by sqrt(d_head).",
    "mask_after_softmax": "The mask was applied after the softmax, so rows no longer sum to 1: set future "
    "scores to -inf before normalising.",
    "swapped_head_order": "The head outputs were concatenated in reverse order: keep head 1 first.",
    "no_output_projection": "The output projection was skipped: the result stops at the concatenation.",
    "no_mask": "There is no causal mask: queries put weight on later tokens.",
    "diagonal_masked": "The diagonal was masked too: a token must be able to attend to itself (mask j > i, "
    "not j >= i).",
    "zero_mask": "Future scores were set to 0 instead of -inf, so future tokens still get weight.",
    "softmax_wrong_axis": "The softmax ran over queries (columns) instead of over keys (rows).",
    "weights_transposed": "The weights are transposed: row i must be query i's distribution over the keys.",
}


# Mistakes that can happen together, one from each group (None: that step is right).
GROUPS: tuple[tuple[str | None, ...], ...] = (
    (None, "interleaved_split", "reuse_first_slice"),
    (None, "no_scaling", "scale_by_d_model"),
    (None, "mask_after_softmax", "no_mask", "diagonal_masked", "zero_mask", "softmax_wrong_axis", "weights_transposed"),
    (None, "swapped_head_order"),
)
MASKING = set(GROUPS[2]) - {None}


@dataclass(frozen=True)
class Diagnosis:
    correct: bool
    max_abs_error: float
    mistakes: tuple[str, ...]  # every known mistake the output shows (empty: correct, or unknown)
    message: str

    @property
    def diagnosis(self) -> str | None:
        """The mistake's id when the output shows exactly one."""
        return self.mistakes[0] if len(self.mistakes) == 1 else None


def expected_outputs(tokens, heads: int, causal: bool, *mistakes: str | None) -> dict[str, np.ndarray]:
    """What a correct implementation, or one making `mistakes` (any mix of GROUPS), returns.

    Q = K = V = tokens and no projections, as in the exercise.
    """
    made = {m for m in mistakes if m}
    trace = multi_head_attention(tokens, heads, causal=causal)  # validates, and the correct scores
    x, cfg = trace.tokens, trace.config
    if "interleaved_split" in made:
        parts = ops.gather_heads(x, ops.interleaved_features(heads, cfg.d_head))  # [H, n, d_head]
    elif "reuse_first_slice" in made:
        parts = ops.gather_heads(x, np.tile(np.arange(cfg.d_head), (heads, 1)))
    else:
        parts = ops.split_heads(x, heads)
    scale = {"no_scaling": 1.0, "scale_by_d_model": 1 / math.sqrt(cfg.d_model)}
    s = ops.scores(parts, parts, next((scale[m] for m in made if m in scale), 1 / math.sqrt(cfg.d_head)))
    mask = next((m for m in made if m in MASKING), None) if causal else None
    weights = _MASKINGS[mask](s, trace.mask) if causal else ops.softmax(s)
    head_outputs = ops.attend(weights, parts)  # [H, n, d_head]
    ordered = head_outputs[::-1] if "swapped_head_order" in made else head_outputs
    return {"weights": weights, "head_outputs": head_outputs, "concatenated": ops.merge_heads(ordered)}


def diagnose(tokens, heads: int, causal: bool, output: dict[str, np.ndarray]) -> Diagnosis:
    """Compare `output` (any of weights, head_outputs, concatenated) with the correct result, then
    with every combination of known mistakes; the fewest mistakes that reproduce it win."""
    parts = [p for p in ("weights", "head_outputs", "concatenated") if p in output]
    if not parts:
        raise AttentionInputError("send at least one of weights, head_outputs, concatenated", field="output")
    correct = expected_outputs(tokens, heads, causal)
    for part in parts:
        if np.shape(output[part]) != correct[part].shape:
            raise AttentionInputError(
                f"output.{part} has shape {list(np.shape(output[part]))}; for this case it must be "
                f"{list(correct[part].shape)}",
                field=f"output.{part}",
            )
    got = {p: np.asarray(output[p], dtype=float) for p in parts}
    error = max(float(np.abs(got[p] - correct[p]).max()) for p in parts)
    if error <= TOLERANCE:
        return Diagnosis(True, error, (), f"Correct: every number matches the reference within {TOLERANCE:g}.")
    for combo in sorted(_combinations(causal), key=len):
        candidate = expected_outputs(tokens, heads, causal, *combo)
        if all(np.allclose(got[p], candidate[p], atol=TOLERANCE, rtol=0) for p in parts):
            return Diagnosis(False, error, combo, " ".join(MISTAKES[m] for m in combo))
    return Diagnosis(
        False,
        error,
        (),
        f"Incorrect (largest difference {error:.3g}), and not a known mistake: "
        "compare your weights with a small case worked by hand.",
    )


def _combinations(causal: bool) -> list[tuple[str, ...]]:
    combos: list[tuple[str, ...]] = [()]
    for group in GROUPS:
        if not causal and group is GROUPS[2]:
            continue  # without the mask these mistakes do not show
        combos = [c + ((m,) if m else ()) for c in combos for m in group]
    return [c for c in combos if c]


def _correct_mask(s: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return ops.softmax(s, mask)


def _mask_after_softmax(s: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return np.where(mask, 0.0, ops.softmax(s))


def _no_mask(s: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return ops.softmax(s)


def _diagonal_masked(s: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return ops.softmax(s, mask | np.eye(mask.shape[0], dtype=bool))  # row 0 sees nothing: zeros


def _zero_mask(s: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return ops.softmax(np.where(mask, 0.0, s))


def _wrong_axis(s: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return np.swapaxes(ops.softmax(np.swapaxes(s, -1, -2), mask.T), -1, -2)


def _transposed(s: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return np.swapaxes(ops.softmax(s, mask), -1, -2).copy()


_MASKINGS = {
    None: _correct_mask,
    "mask_after_softmax": _mask_after_softmax,
    "no_mask": _no_mask,
    "diagonal_masked": _diagonal_masked,
    "zero_mask": _zero_mask,
    "softmax_wrong_axis": _wrong_axis,
    "weights_transposed": _transposed,
}
