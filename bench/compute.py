"""Engine vs PyTorch SDPA: n=512, d_model=768, H=12, float64, causal, same inputs, same process.

The engine keeps every intermediate (scores, weights, per-head outputs, concat, output,
residual); SDPA keeps none. The two alternate in blocks of runs (so neither pays for the
other's thread pool spinning down or cache being cold); the figure is the median over all
blocks; the ratio is the median of each block pair's ratio. Budget: engine / SDPA <= 1.0.

    python bench/compute.py [--rounds 40] [--json]
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
from service.api.attention.allocator import retain_freed_memory  # noqa: E402
from service.compute import multi_head_attention  # noqa: E402

N, D_MODEL, HEADS = 512, 768, 12
BUDGET = 1.0
BLOCK, WARMUP = 10, 3


def run(rounds: int, tuned_allocator: bool = True) -> dict:
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return {
            "name": "engine vs PyTorch SDPA",
            "skipped": "torch is not installed (pip install torch==2.13.0)",
            "budget": f"ratio <= {BUDGET}",
        }

    retained = retain_freed_memory() if tuned_allocator else False
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, D_MODEL))
    d_head = D_MODEL // HEADS
    # SDPA gets the heads already split ([H, n, d_head]): it does strictly less work.
    qkv = torch.from_numpy(x).reshape(N, HEADS, d_head).transpose(0, 1).contiguous()

    def engine() -> None:
        multi_head_attention(x, HEADS)

    def sdpa() -> None:
        F.scaled_dot_product_attention(qkv, qkv, qkv, is_causal=True)

    engine_blocks: list[float] = []
    sdpa_blocks: list[float] = []
    for _ in range(max(1, rounds // BLOCK)):
        for fn, blocks in ((engine, engine_blocks), (sdpa, sdpa_blocks)):
            times = []
            for i in range(BLOCK + WARMUP):
                start = time.perf_counter()
                fn()
                if i >= WARMUP:
                    times.append(time.perf_counter() - start)
            blocks.append(statistics.median(times))
    # This VM's speed drifts by tens of percent within seconds: the ratio of neighbouring blocks
    # is robust to that, so the budget is judged on the median of per-round ratios.
    ratios = [e / s for e, s in zip(engine_blocks, sdpa_blocks, strict=True)]
    ratio = statistics.median(ratios)
    engine_ms = statistics.median(engine_blocks) * 1e3
    sdpa_ms = statistics.median(sdpa_blocks) * 1e3
    return {
        "name": f"engine n={N} d_model={D_MODEL} H={HEADS} float64, all intermediates, "
        + ("glibc told to keep freed memory (as the service runs)" if retained else "default allocator"),
        "figure": round(engine_ms, 2),
        "unit": "ms (median)",
        "baseline": "torch SDPA is_causal, float64, CPU",
        "baseline_figure": round(sdpa_ms, 2),
        "ratio": round(ratio, 3),
        "ratio_range": [round(min(ratios), 3), round(max(ratios), 3)],
        "budget": f"ratio <= {BUDGET}",
        "ok": ratio <= BUDGET,
        "threads": torch.get_num_threads(),
        "allocator_tuned": retained,
        "torch": torch.__version__,
        "numpy": np.__version__,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=120, help="measured runs of each (blocks of 10)")
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    parser.add_argument(
        "--default-allocator",
        action="store_true",
        help="leave glibc's malloc thresholds alone (both sides of the comparison)",
    )
    args = parser.parse_args()
    result = run(args.rounds, tuned_allocator=not args.default_allocator)
    if args.json or result.get("skipped"):
        print(json.dumps(result))
    else:
        print(
            f"engine {result['figure']} ms, SDPA {result['baseline_figure']} ms, "
            f"ratio {result['ratio']} (per-round {result['ratio_range']}) "
            f"(budget {result['budget']}: {'ok' if result['ok'] else 'OVER'})"
        )


if __name__ == "__main__":
    main()
