"""A prediction a learner records before an experiment and the engine judges afterwards, on the
learner's own tokens: which head's weights move when only the last two features of one token
change. The predict checkpoint names it (`prediction:` in the front matter) and its completing
event carries the choice (`data.choice`); the experiment's `last-two` event carries the edit
(`data.tokens_before`, `data.tokens`, `data.causal`), and the engine recomputes both sides."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..compute.engine import multi_head_attention

MAX_SIDE = 16  # tokens and features in an edit the engine re-runs (the workbench has 3 x 4)


@dataclass(frozen=True)
class Prediction:
    id: str
    manipulation: str  # the experiment's manipulation whose event carries the edit
    choices: tuple[str, ...]


HEADS_MOVED = Prediction("heads-moved-by-last-two", "last-two", ("head-1", "head-2", "both", "neither"))
PREDICTIONS = {HEADS_MOVED.id: HEADS_MOVED}


def _matrix(value: Any) -> np.ndarray | None:
    """A [n][d] list of finite numbers (the workbench's tokens), or None."""
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_SIDE:
        return None
    if not all(isinstance(row, list) and len(row) == len(value[0]) for row in value):
        return None
    cells = [c for row in value for c in row]
    if not cells or not all(isinstance(c, int | float) and not isinstance(c, bool) and math.isfinite(c) for c in cells):
        return None
    if len(value[0]) > MAX_SIDE or len(value[0]) % 2:
        return None
    return np.asarray(value, dtype=np.float64)


def observed(data: dict[str, Any]) -> str | None:
    """Which heads' weights the edit in `data` moved, by the engine (two heads, identity
    projections: the lesson's teaching case); None when the event does not carry a whole edit."""
    before, after = _matrix(data.get("tokens_before")), _matrix(data.get("tokens"))
    if before is None or after is None or before.shape != after.shape:
        return None
    causal = data.get("causal", True)
    if not isinstance(causal, bool):
        return None
    moved = [
        not np.allclose(a, b, rtol=0.0, atol=1e-12)
        for a, b in zip(
            multi_head_attention(before, 2, causal=causal).weights,
            multi_head_attention(after, 2, causal=causal).weights,
            strict=True,
        )
    ]
    return {(True, True): "both", (True, False): "head-1", (False, True): "head-2"}.get((moved[0], moved[1]), "neither")


def judged(choice: Any, data: dict[str, Any] | None) -> dict[str, Any]:
    """{choice, observed, held}: held is None until the experiment's edit has been seen."""
    seen = observed(data) if data else None
    return {"choice": choice, "observed": seen, "held": None if seen is None or choice is None else choice == seen}
