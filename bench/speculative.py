"""Speculative decoding on the trained byte model against the target decoding alone, same run: target passes
per emitted byte (the figure speculative decoding exists for) and wall time, at temperatures 0 and 1, with
the lens (the model's own first layer) and the bigram table as drafts.

Five prompts, 64 bytes each, gamma 4. The target alone: one pass over its KV cache per byte
(models/speculate.py's Decoder, one position a step, the likeliest byte at 0, a seeded draw at 1). On two
cores and a model of two layers a draft is not much cheaper than the target, so the wall-time ratio is a
record, not a promise; the budget is on passes: fewer target passes than bytes (ratio under 1).

    python bench/speculative.py [--json]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.common import emit  # noqa: E402
from service.compute import speculative as rule  # noqa: E402
from service.compute.failure_modes import recipe_of  # noqa: E402
from service.models.byte_model import load_models  # noqa: E402
from service.models.speculate import Decoder, Request, speculate  # noqa: E402

PROMPTS = [b"def f(x):\n    return ", b"The ", b"q8Lm3Zk7q8Lm3Zk7", b"import os\n", b".. note::\n   "]
NEW, GAMMA, BUDGET = 64, 4, 1.0


def target_alone(model, prompt: list[int], temperature: float, seed: int) -> float:
    """Seconds to emit NEW bytes with the target only: one pass over the cache a byte."""
    rng, start = np.random.default_rng(seed), time.perf_counter()
    decoder, text = Decoder(model, model.layers, len(prompt) + NEW), list(prompt)
    p = decoder.extend(np.array(text), 0)[-1]
    for _ in range(NEW):
        text.append(rule.inverse_cdf(rule.tempered(p, temperature), float(rng.random())))
        p = decoder.extend(np.array(text[-1:]), len(text) - 1)[0]
    return time.perf_counter() - start


def measure(model, draft: str, temperature: float) -> dict:
    passes, speculative_seconds, alone_seconds = [], [], []
    for seed, prompt in enumerate(PROMPTS):
        start = time.perf_counter()
        done = speculate(model, Request(list(prompt), GAMMA, NEW, temperature, seed, draft, recipe_of(None)))
        speculative_seconds.append(time.perf_counter() - start)
        passes.append(len(done["rounds"]) / NEW)
        alone_seconds.append(target_alone(model, list(prompt), temperature, seed))
    per_byte = statistics.mean(passes)
    return {
        "name": f"Speculative decoding, {draft} draft, T = {temperature:g}: target passes per byte",
        "figure": round(per_byte, 3),
        "unit": f"passes/byte (wall {sum(speculative_seconds) * 1000:.0f} ms for {len(PROMPTS) * NEW} bytes)",
        "baseline": "the target alone",
        "baseline_figure": f"1 pass/byte (wall {sum(alone_seconds) * 1000:.0f} ms)",
        "ratio": round(per_byte, 3),
        "budget": f"< {BUDGET:g} (wall ratio {sum(speculative_seconds) / sum(alone_seconds):.2f}, recorded)",
        "ok": per_byte < BUDGET,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    model = load_models(Path(__file__).resolve().parents[1] / "content" / "models")["bytes-2l-attn"]
    for draft in ("lens", "bigram"):
        for temperature in (0.0, 1.0):
            emit(measure(model, draft, temperature), args.json)


if __name__ == "__main__":
    main()
