"""Decoding with the KV cache vs recomputing the full causal pass at every step, same run.

Generating 512 positions at d_model 768, 12 heads, learned W_Q, W_K, W_V, W_O, float64, every
intermediate kept: the cached path (service/compute/decode.py: each step projects its own token,
appends to the cache, attends over it) against the engine's full causal pass run again on the first
t + 1 tokens at every step t (what generating without a cache costs; only row t is new each time).
The two alternate in rounds; the ratio is the median of each round's ratio. Budget: at least 20x.

Each cached step is timed alone too (the median of five decodes): its cost must grow linearly with
the position (the attention over t + 1 cached keys), so the figure reports the least-squares slope
over the medians of bins of 32 steps (microseconds per cached position), the intercept (the step's
fixed cost: projecting one token through four 768 x 768 matrices) and R^2 of that line.

A sliding window makes the cache roll: decoding 2,048 positions with W = 64 (d_model 256, 4 heads),
a step's cost must stop growing once the cache holds W positions: the median of the last 32 steps
within 1.2x of the 32 steps after position W, where the same decode without a window keeps growing.

    python bench/decode.py [--rounds 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from service.compute import multi_head_attention  # noqa: E402
from service.compute.decode import _Decoder, decode_attention  # noqa: E402
from service.compute.inputs import prepare  # noqa: E402

N, D_MODEL, HEADS = 512, 768, 12
BUDGET = 20.0


def problem(seed: int = 0) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((N, D_MODEL))
    w = {name: rng.standard_normal((D_MODEL, D_MODEL)) / np.sqrt(D_MODEL) for name in ("w_q", "w_k", "w_v", "w_o")}
    return x, w


def cached(x: np.ndarray, w: dict[str, np.ndarray]) -> float:
    start = time.perf_counter()
    decode_attention(x, HEADS, **w)
    return time.perf_counter() - start


def recomputed(x: np.ndarray, w: dict[str, np.ndarray]) -> float:
    start = time.perf_counter()
    for t in range(N):
        multi_head_attention(x[: t + 1], HEADS, **w)  # the whole prefix again; only row t is new
    return time.perf_counter() - start


def step_times(
    x: np.ndarray, w: dict[str, np.ndarray], repeats: int = 5, heads: int = HEADS, window: int | None = None
) -> np.ndarray:
    """Each cached step's time [n] (the median over `repeats` decodes), under `window` if given."""
    runs = []
    for _ in range(repeats):
        xs, cfg, weights = prepare(
            x,
            heads,
            True,
            (w["w_q"], w["w_k"], w["w_v"], w["w_o"]),
            (None,) * 4,
            None,
            None,
            None,
            None,
            {"window": window},
        )
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):
            decoder = _Decoder(xs, cfg, weights)
            times = []
            for t in range(len(xs)):
                start = time.perf_counter()
                decoder.step(t, t + 1)
                times.append(time.perf_counter() - start)
        runs.append(times)
    return np.median(np.array(runs), axis=0)


BIN = 32  # positions a point of the fit stands for: one step's time is too noisy alone (the VM's jitter)


def fit(times: np.ndarray) -> tuple[float, float, float]:
    """Least squares time = intercept + slope * position over the medians of bins of BIN steps;
    (slope, intercept, R^2 of the line through those medians)."""
    bins = len(times) // BIN
    positions = np.arange(bins) * BIN + (BIN - 1) / 2  # each bin's middle position
    medians = np.median(times[: bins * BIN].reshape(bins, BIN), axis=1)
    slope, intercept = np.polyfit(positions, medians, 1)
    predicted = intercept + slope * positions
    r2 = 1 - float(((medians - predicted) ** 2).sum()) / float(((medians - medians.mean()) ** 2).sum())
    return float(slope), float(intercept), r2


LONG, WINDOW, LONG_D_MODEL, LONG_HEADS = 2048, 64, 256, 4


def rolling() -> dict:
    """The last 32 steps against the 32 after position W, with the window and without."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((LONG, LONG_D_MODEL))
    w = {name: rng.standard_normal((LONG_D_MODEL, LONG_D_MODEL)) / 16 for name in ("w_q", "w_k", "w_v", "w_o")}
    growth = {}
    for window in (WINDOW, None):
        steps = step_times(x, w, repeats=3, heads=LONG_HEADS, window=window)
        growth[window] = float(np.median(steps[-BIN:]) / np.median(steps[WINDOW : WINDOW + BIN]))
    return {
        "name": f"a rolling cache's decode step, {LONG} positions with W = {WINDOW}, d_model={LONG_D_MODEL} "
        f"H={LONG_HEADS}: the last {BIN} steps against the {BIN} after position W (medians of 3 decodes)",
        "figure": round(growth[WINDOW], 2),
        "unit": "x (last steps / steps after W)",
        "baseline": "the same decode without a window",
        "baseline_figure": round(growth[None], 2),
        "ratio": round(growth[None] / growth[WINDOW], 2),
        "ratio_meaning": "how much more the unwindowed step grew",
        "budget": "windowed last / after W <= 1.2",
        "ok": growth[WINDOW] <= 1.2,
    }


def run(rounds: int) -> list[dict]:
    x, w = problem()
    # The cached trace equals the recomputed rows (decode.py's tests prove it to 1e-12); checked here once.
    head = decode_attention(x[:16], HEADS, **w).as_pass().output - multi_head_attention(x[:16], HEADS, **w).output
    assert np.abs(head).max() < 1e-9
    cached(x, w)  # warm up
    pairs = [(cached(x, w), recomputed(x, w)) for _ in range(rounds)]
    ratios = [r / c for c, r in pairs]
    ratio = statistics.median(ratios)
    slope, intercept, r2 = fit(step_times(x, w))
    steps = step_times(x, w, repeats=3)
    quarter = N // 4
    growth = float(np.median(steps[-quarter:]) / np.median(steps[:quarter]))
    return [
        {
            "name": f"decode {N} positions with the KV cache, d_model={D_MODEL} H={HEADS}, learned projections, "
            "every intermediate kept",
            "figure": round(statistics.median(c for c, _ in pairs) * 1e3, 1),
            "unit": "ms (median)",
            "baseline": "the engine's full causal pass recomputed on the prefix at every step",
            "baseline_figure": round(statistics.median(r for _, r in pairs) * 1e3, 1),
            "ratio": round(ratio, 1),
            "ratio_range": [round(min(ratios), 1), round(max(ratios), 1)],
            "budget": f"baseline / cached >= {BUDGET:g}",
            "ok": ratio >= BUDGET,
        },
        {
            "name": "one cached decode step's cost against its position (least squares over 16 bins of 32 steps)",
            "figure": round(slope * 1e6, 4),
            "unit": "us per cached position (slope)",
            "baseline": "the step's fixed cost (intercept: projecting its token)",
            "baseline_figure": round(intercept * 1e6, 1),
            "ratio": round(r2, 3),
            "ratio_meaning": "R^2 of the straight line",
            "last_quarter_over_first": round(growth, 2),
            "budget": "linear in the position: slope > 0, R^2 of the line reported",
            "ok": slope > 0,
        },
        rolling(),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print JSON lines")
    parser.add_argument("--rolling", action="store_true", help="only the rolling cache's figure")
    args = parser.parse_args()
    for row in [rolling()] if args.rolling else run(args.rounds):
        if args.json:
            print(json.dumps(row))
        else:
            print(
                f"{row['name']}: {row['figure']} {row['unit']}; {row['baseline']}: {row['baseline_figure']}; "
                f"ratio {row['ratio']} ({row['budget']}: {'ok' if row['ok'] else 'OVER'})"
            )


if __name__ == "__main__":
    main()
