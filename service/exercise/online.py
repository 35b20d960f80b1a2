"""The online-softmax exercise's checker: a learner's output (and L) for a case (tokens, causal, the
block sizes; one head, Q = K = V = tokens, so the scores are x x^T / sqrt(d)) compared with the engine's
tiled loop and with what each combination of the exercise's three slips computes (the registry's tiled
failure modes, `service.compute.online`): the fewest slips that reproduce the output are named. The
verdict and its words are the multi-head checker's (`Diagnosis`), not a second copy of them.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np

from ..compute.errors import AttentionInputError
from ..compute.failure_modes import REGISTRY
from ..compute.online import SLIPS, TiledHead, tiled_attention
from .diagnose import TOLERANCE, Diagnosis, first_nan, matches, max_difference

COMBINATIONS = [c for size in range(1, len(SLIPS) + 1) for c in combinations(SLIPS, size)]
RUNS = 1 + len(COMBINATIONS)  # the tiled loops one diagnosis may run: the right one and each combination
# A challenge's cases: two causal (the diagonal tile's slip shows only there), one unmasked; widths and
# lengths the shortcut looks up (service/api/attention/shortcut.py: the same numbers as one plain head).
CAUSAL, WIDTHS, LENGTHS = (True, True, False), (4, 6, 8), (4, 7)


def new_online_cases(rng: np.random.Generator) -> list[dict]:
    """Three small random cases (JSON-ready), each drawn again until every slip it can show changes its output."""
    cases = []
    for causal in CAUSAL:
        while True:
            n, d = int(rng.integers(*LENGTHS)), int(rng.choice(WIDTHS))
            bq, bk = (int(b) for b in rng.integers(1, n, size=2))  # two tiles of keys at least: values to carry
            case = {
                "tokens": rng.uniform(-2, 2, size=(n, d)).round(2).tolist(),
                "causal": causal,  # [n, d]
                "block_q": bq,
                "block_k": bk,
            }
            right = loop(case["tokens"], causal, bq, bk).output
            slips = tuple(s for s in SLIPS if causal or "causal" not in REGISTRY[s].needs)  # what can show here
            if not any(matches(loop(case["tokens"], causal, bq, bk, (slip,)).output, right) for slip in slips):
                cases.append(case)
                break
    return cases


def loop(tokens, causal: bool, block_q: int, block_k: int, slips: tuple[str, ...] = ()) -> TiledHead:
    """The one head's tiled loop over Q = K = V = tokens [n, d], as code making `slips` computes it."""
    return tiled_attention(tokens, 1, block_q=block_q, block_k=block_k, causal=causal, slip=slips).heads[0]


def diagnose_online(tokens, causal: bool, block_q: int, block_k: int, output, lse=None) -> Diagnosis:
    """output [n, d] (NaN where a row saw nothing), lse [n] or None: right, or the slips that give it."""
    correct = loop(tokens, causal, block_q, block_k)
    got = np.asarray(output, dtype=float)
    for part, value, want in (("output", got, correct.output), ("lse", lse, correct.lse)):
        if value is not None and np.shape(value) != want.shape:
            axes = "[n][d]" if part == "output" else "[n]"
            raise AttentionInputError(
                f"output.{part} has shape {list(np.shape(value))}; for this case it must be "
                f"{axes} = {list(want.shape)}",
                field=f"output.{part}",
            )
    nan = np.isnan(got).any()
    error = max_difference(got, correct.output)
    lse_right = lse is None or bool(np.allclose(lse, correct.lse, atol=TOLERANCE, rtol=0))
    if lse is not None:
        error = max(error, max_difference(np.asarray(lse, dtype=float), correct.lse))
    if not nan and matches(got, correct.output) and lse_right:
        return Diagnosis(True, error, ())
    found = ("output", first_nan(got)) if nan else None
    if not nan and matches(got, correct.output):  # the output right, L not (a slip's output may be right too)
        return Diagnosis(False, error, ())
    for slips in COMBINATIONS:
        if matches(got, loop(tokens, causal, block_q, block_k, slips).output):
            return Diagnosis(False, error, slips, found)
    return Diagnosis(False, error, (), found)
