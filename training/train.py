"""Train the two-layer attention-only byte model and write its weights and card.

    .venv/bin/pip install torch==2.13.0          # the CPU wheel; never a bare `torch`
    apt-get install -y python3.11-doc            # the text (PSF licence)
    .venv/bin/python -m training.train           # about 5 minutes on one core here (make train)

Deterministic: one torch thread, seeded torch and numpy generators, a fixed number of steps.
Writes content/models/<id>/model.safetensors (float32) and card.json (data, steps, seed,
losses, head scores measured by the service's own numpy code, licences).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import time
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file

from service.models.byte_model import PATTERNS, SCORE_SEED, SCORE_SEQUENCES, Model, pattern_scores, repeated_sequences

from .data import TEXT_ROOT, batch, corpus, text_files
from .model import AttentionOnly

ROOT = Path(__file__).resolve().parents[1]
MODEL_ID = "bytes-2l-attn"
DESCRIPTION = (
    "A two-layer, attention-only transformer over bytes (4 heads per layer, d_model 64, context 128), "
    "trained on this machine on Python's documentation and on random sequences repeated. "
)


def probe_scores(model: AttentionOnly, probe: list[np.ndarray]) -> tuple[float, float]:
    """The best head's previous-token and induction scores on sequences typed twice, during training."""
    best = np.zeros((model.layers, model.heads, len(PATTERNS)))
    for sequence in probe:
        kept: list = []
        with torch.no_grad():
            model(torch.from_numpy(sequence.astype(np.int64))[None], keep=kept)
        for layer, weights in enumerate(kept):
            best[layer] += pattern_scores(weights[0].double().numpy()) / len(probe)
    return float(best[..., 0].max()), float(best[..., 1].max())


def train(steps: int, seed: int, batch_size: int, lr: float, log_every: int) -> tuple[AttentionOnly, dict]:
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True)
    rng = np.random.default_rng(seed)
    text = corpus()
    model = AttentionOnly()
    optimiser = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    warmup = 100  # then constant: the induction heads' phase change needs many full-size steps
    schedule = torch.optim.lr_scheduler.LambdaLR(optimiser, lambda step: min(1.0, (step + 1) / warmup))
    probe = repeated_sequences(np.random.default_rng(seed + 1), 8, longest=model.context // 2)
    history, started = [], time.perf_counter()
    for step in range(1, steps + 1):
        tokens = torch.from_numpy(batch(rng, text, batch_size, model.context).astype(np.int64))
        logits = model(tokens[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        optimiser.step()
        schedule.step()
        if step % log_every == 0 or step == steps:
            seconds = round(time.perf_counter() - started)
            history.append({"step": step, "loss": round(loss.item(), 4), "seconds": seconds})
            previous, induction = probe_scores(model, probe)
            history[-1].update(previous_token=round(previous, 3), induction=round(induction, 3))
            print(
                f"step {step:6d}  loss {loss.item():.4f}  best previous-token {previous:.2f}  "
                f"best induction {induction:.2f}  {seconds:6d} s",
                flush=True,
            )
    run = {
        "steps": steps,
        "seed": seed,
        "batch_size": batch_size,
        "optimiser": f"AdamW lr {lr} (100 steps of warm-up, then constant), weight decay 0.01",
        "seconds": round(time.perf_counter() - started),
        "machine": f"{platform.processor() or platform.machine()}, 1 torch thread, torch {torch.__version__}",
        "losses": history,
        "text_bytes": int(len(text)),
        "text_files": len(text_files()),
    }
    return model, run


def write(model: AttentionOnly, run: dict, out: Path) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    previous = out / "card.json"
    translations = json.loads(previous.read_text()).get("translations") if previous.exists() else None
    save_file(model.tensors(), str(out / "model.safetensors"))
    card = {
        "id": out.name,
        "description": DESCRIPTION,
        "architecture": {
            "kind": "attention-only transformer, bytes in, next byte out",
            "layers": model.layers,
            "heads": model.heads,
            "d_model": model.d_model,
            "context": model.context,
            "vocabulary": 256,
            "positions": "RoPE on each head's queries and keys (half pairing)",
            "rope_base": model.rope_base,
            "layer": "x + the workbench's multi-head attention (causal, 1/sqrt(d_head), W_O) of LayerNorm(x)",
            "final": "LayerNorm without affine, then W_U",
            "parameters": int(sum(p.numel() for p in model.parameters())),
        },
        "data": {
            "text": f"reStructuredText sources of Python's documentation, Debian package python3.11-doc ({TEXT_ROOT})",
            "repeats": "a random printable ASCII sequence of 8 to 64 bytes, repeated to fill the context",
            "mix": "half text windows, half repeated sequences, in every batch",
        },
        "training": run,
        "licences": {
            "text": "PSF License Agreement (Python documentation)",
            "weights": "MIT, as this repository",
        },
        "sha256": hashlib.sha256((out / "model.safetensors").read_bytes()).hexdigest(),
    }
    (out / "card.json").write_text(json.dumps(card, indent=2) + "\n")
    scores = Model.load(out).scores  # measured by the service's own numpy code
    card["head_scores"] = {
        "measured_on": f"{SCORE_SEQUENCES} random printable sequences of 16 to 64 bytes, each typed twice, "
        f"numpy seed {SCORE_SEED}",
        "patterns": list(PATTERNS),
        "layers": [[[round(float(s), 4) for s in head] for head in layer] for layer in scores],
    }
    if translations:  # the card's words in other languages (content, like the lessons): kept, to be checked
        card["translations"] = translations
    (out / "card.json").write_text(json.dumps(card, indent=2, ensure_ascii=False) + "\n")
    return card


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--log-every", type=int, default=250)
    parser.add_argument("--out", type=Path, default=ROOT / "content" / "models" / MODEL_ID)
    args = parser.parse_args()
    model, run = train(args.steps, args.seed, args.batch_size, args.lr, args.log_every)
    card = write(model, run, args.out)
    for layer, heads in enumerate(card["head_scores"]["layers"], start=1):
        for head, scores in enumerate(heads, start=1):
            named = ", ".join(f"{p} {s:.3f}" for p, s in zip(PATTERNS, scores, strict=True))
            print(f"layer {layer} head {head}: {named}")


if __name__ == "__main__":
    main()
