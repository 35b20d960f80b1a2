"""Where two computations of the same input part ways: the pipeline's stages in order, and the
first whose numbers differ. The workbench marks it (`data-stage`), `/attention/compare` and the
exercise's `trace` name it, with these names."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .engine import AttentionTrace

# The pipeline's stages as the workbench draws them (docs/conventions.md).
STAGES = ("x", "q", "k", "v", "scores", "weights", "head-output", "concat", "wo", "output", "residual")


def stage_arrays(trace: AttentionTrace, w_o: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Each stage's numbers in `trace`; "wo" is the output projection the computation applied:
    the identity when W_O is None, or when the computation skipped it."""
    d_model = trace.config.d_model
    skipped = trace.config.recipe.output == "skip"
    applied = np.eye(d_model) if w_o is None or skipped else np.asarray(w_o, dtype=np.float64)
    arrays: dict[str, np.ndarray | None] = {
        "x": trace.tokens,  # [n, d_model]
        "q": trace.query,  # [H, n, d_head]
        "k": trace.key,
        "v": trace.value,
        "scores": trace.scores,  # [H, n, n]
        "weights": trace.weights,
        "head-output": trace.head_outputs,  # [H, n, d_head]
        "concat": trace.concat,  # [n, d_model]
        "wo": applied,  # [d_model, d_model]
        "output": trace.output,
        "residual": trace.residual,
    }
    return {stage: array for stage, array in arrays.items() if array is not None}  # absorbed latent: no K, no V


def differing(expected: Mapping[str, np.ndarray], other: Mapping[str, np.ndarray]) -> list[str]:
    """The stages both hold whose numbers differ (beyond float64 rounding, or in shape), in order."""
    found = []
    for stage in STAGES:
        if stage not in expected or stage not in other:
            continue
        a, b = np.asarray(expected[stage]), np.asarray(other[stage])
        if a.shape != b.shape or not np.allclose(a, b, rtol=1e-9, atol=1e-12):
            found.append(stage)
    return found


PER_HEAD = ("q", "k", "v", "scores", "weights", "head-output")  # [H, ...]: one slice per head


def divergence(expected: Mapping[str, np.ndarray], other: Mapping[str, np.ndarray]) -> dict:
    """Where `other` parts from `expected`, head by head: every differing stage in order, each
    head's own differing stages (a head whose numbers are identical has none, whatever the other
    heads do), and the first difference in pipeline order over every head (its head, for a
    per-head stage; None for a shared one)."""
    stages = differing(expected, other)
    heads = int(np.asarray(expected["weights"]).shape[0]) if "weights" in expected else 0
    per_head: list[list[str]] = [[] for _ in range(heads)]
    for stage in (s for s in PER_HEAD if s in stages):
        a, b = np.asarray(expected[stage]), np.asarray(other[stage])
        for h in range(heads):
            if a.shape != b.shape or not np.allclose(a[h], b[h], rtol=1e-9, atol=1e-12):
                per_head[h].append(stage)
    first = stages[0] if stages else None
    first_head = None
    if first in PER_HEAD:
        first_head = next(h for h in range(heads) if first in per_head[h])
    return {
        "first": first,
        "first_head": first_head,
        "stages": stages,
        "heads": [{"head": h, "stages": found} for h, found in enumerate(per_head)],
    }


# What a comparison subtracts, cell by cell (broken - correct).
DIFFERENCES = ("weights", "head_outputs", "concat", "output", "residual")


@dataclass(frozen=True, eq=False)
class Comparison:
    """A correct and a broken computation of the same input: their traces, the differences of every
    number both hold from the weights on (broken - correct), and where they part ways."""

    correct: AttentionTrace
    broken: AttentionTrace
    differences: dict[str, np.ndarray]
    divergence: dict


def compare(correct: AttentionTrace, broken: AttentionTrace, w_o: np.ndarray | None = None) -> Comparison:
    """`broken` against `correct` (the same tokens and weights; `w_o` the output projection both were given)."""
    differences = {name: getattr(broken, name) - getattr(correct, name) for name in DIFFERENCES}
    parted = divergence(stage_arrays(correct, w_o), stage_arrays(broken, w_o))
    return Comparison(correct, broken, differences, parted)


def max_difference(a: AttentionTrace, b: AttentionTrace) -> float:
    """The largest difference between two traces of the same tokens over every number both hold
    (queries, keys, values, scores, weights, head outputs, concatenation, output, residual, latent):
    a decode done right against the full causal pass is 0 up to float64 rounding."""
    found = 0.0
    for name in (
        "query",
        "key",
        "value",
        "scores",
        "weights",
        "head_outputs",
        "concat",
        "output",
        "residual",
        "latent",
        "rope_key",
    ):
        x, y = getattr(a, name), getattr(b, name)
        if x is not None and y is not None and x.shape == y.shape and x.size:
            found = max(found, float(np.abs(x - y).max()))
    return found
