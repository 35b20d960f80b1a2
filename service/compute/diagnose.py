"""Name the bug behind a learner's attention output, without running their code.

A learner's `weights`, `head_outputs`, `concatenated` and/or `output` for a case (tokens,
heads, causal, optional output projection; Q = K = V = tokens) are compared with the correct
result, then with what each combination of known mistakes computes. The fewest mistakes that
reproduce the output within the tolerance are the diagnosis. NaN in an output (a masked
diagonal leaves query 1 with nothing to attend to: 0/0) is never correct, and matches the
zeros the checker computes for such a row, so the mistake is still named.
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
    "slice (head 1 features 1..d_head, head 2 the next d_head, ...; numbered from 1).",
    "reuse_first_slice": "Every head read the first slice of features: each head must read its own slice, "
    "otherwise the other features never reach attention.",
    "no_scaling": "The scores were not divided by sqrt(d_head) before the softmax.",
    "scale_by_d_model": "The scores were divided by sqrt(d_model); each head divides by sqrt(d_head).",
    "mask_after_softmax": "The mask was applied after the softmax, so rows no longer sum to 1: set future "
    "scores to -inf before normalising.",
    "swapped_head_order": "The head outputs were concatenated in reverse order: keep head 1 first.",
    "no_output_projection": "The output projection was skipped: the result stops at the concatenation "
    "(output = concatenated @ W_O mixes features across heads).",
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
    (None, "no_output_projection"),
)
MASKING = set(GROUPS[2]) - {None}
UNMASKED = (None, "softmax_wrong_axis")  # the masking step's mistakes that show without a mask


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


def expected_outputs(
    tokens, heads: int, causal: bool, *mistakes: str | None, output_projection=None
) -> dict[str, np.ndarray]:
    """What a correct implementation, or one making `mistakes` (any mix of GROUPS), returns.

    Q = K = V = tokens; `output` is `concatenated @ output_projection` (or `concatenated`).
    """
    made = {m for m in mistakes if m}
    trace = multi_head_attention(tokens, heads, causal=causal, w_o=output_projection)  # validates the case
    x, cfg = trace.tokens, trace.config
    if "interleaved_split" in made:
        parts = ops.gather_heads(x, ops.interleaved_features(heads, cfg.d_head))  # [H, n, d_head]
    elif "reuse_first_slice" in made:
        parts = ops.gather_heads(x, np.tile(np.arange(cfg.d_head), (heads, 1)))
    else:
        parts = ops.split_heads(x, heads)
    scale = {"no_scaling": 1.0, "scale_by_d_model": 1 / math.sqrt(cfg.d_model)}
    s = ops.scores(parts, parts, next((scale[m] for m in made if m in scale), 1 / math.sqrt(cfg.d_head)))
    mask = next((m for m in made if m in MASKING), None)
    if causal:
        weights = _MASKINGS[mask](s, trace.mask)
    else:  # nothing to mask; the softmax can still run over the wrong axis
        weights = _MASKINGS[mask if mask in UNMASKED else None](s, np.zeros(s.shape[-2:], dtype=bool))
    head_outputs = ops.attend(weights, parts)  # [H, n, d_head]
    ordered = head_outputs[::-1] if "swapped_head_order" in made else head_outputs
    concatenated = ops.merge_heads(ordered)  # [n, d_model]
    skip = output_projection is None or "no_output_projection" in made
    output = concatenated if skip else concatenated @ np.asarray(output_projection, dtype=float)  # [n, d_model]
    return {"weights": weights, "head_outputs": head_outputs, "concatenated": concatenated, "output": output}


PARTS = ("weights", "head_outputs", "concatenated", "output")


def diagnose(tokens, heads: int, causal: bool, output: dict[str, np.ndarray], output_projection=None) -> Diagnosis:
    """Compare `output` (any of PARTS) with the correct result, then with every combination of
    known mistakes; the fewest mistakes that reproduce it win."""
    parts = [p for p in PARTS if p in output]
    if not parts:
        raise AttentionInputError("send at least one of " + ", ".join(PARTS), field="output")
    correct = expected_outputs(tokens, heads, causal, output_projection=output_projection)
    for part in parts:
        if np.shape(output[part]) != correct[part].shape:
            raise AttentionInputError(
                f"output.{part} has shape {list(np.shape(output[part]))}; for this case it must be "
                f"{list(correct[part].shape)}",
                field=f"output.{part}",
            )
    got = {p: np.asarray(output[p], dtype=float) for p in parts}
    nan = next((p for p in parts if np.isnan(got[p]).any()), None)
    error = max(_max_difference(got[p], correct[p]) for p in parts)
    if nan is None and error <= TOLERANCE:
        return Diagnosis(True, error, (), f"Correct: every number matches the reference within {TOLERANCE:g}.")
    prefix = f"{nan} contains NaN ({_first_nan(got[nan])}). " if nan else ""
    for combo in sorted(_combinations(causal, output_projection is not None), key=len):
        candidate = expected_outputs(tokens, heads, causal, *combo, output_projection=output_projection)
        if all(_matches(got[p], candidate[p]) for p in parts):
            return Diagnosis(False, error, combo, prefix + " ".join(MISTAKES[m] for m in combo))
    return Diagnosis(
        False,
        error,
        (),
        prefix + f"Incorrect (largest difference {error:.3g}), and not a known mistake: "
        "compare your weights with a small case worked by hand.",
    )


def _matches(got: np.ndarray, candidate: np.ndarray) -> bool:
    """Equal within the tolerance, NaN standing for the zeros of a row that sees nothing."""
    return np.allclose(np.nan_to_num(got, nan=0.0), candidate, atol=TOLERANCE, rtol=0)


def _max_difference(got: np.ndarray, want: np.ndarray) -> float:
    """The largest difference over the cells that are numbers (NaN is reported by name)."""
    diff = np.abs(got - want)
    finite = diff[np.isfinite(diff)]
    return float(finite.max()) if finite.size else 0.0


def _first_nan(values: np.ndarray) -> str:
    """Where the first NaN is, in the 1-based words the lesson uses."""
    where = [int(t) + 1 for t in np.argwhere(np.isnan(values))[0]]
    names = ("head", "query", "key") if values.ndim == 3 else ("query", "feature")
    return ", ".join(f"{name} {i}" for name, i in zip(names, where, strict=False))


def _combinations(causal: bool, projected: bool) -> list[tuple[str, ...]]:
    combos: list[tuple[str, ...]] = [()]
    for group in GROUPS:
        if not causal and group is GROUPS[2]:
            group = UNMASKED  # without the mask only the softmax's axis can go wrong here
        if not projected and group is GROUPS[4]:
            continue  # without W_O skipping it does not show
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
