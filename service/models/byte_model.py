"""A trained byte-level model, run with numpy: each layer is one call of the workbench's engine.

The model (training/model.py trained it) is attention only: bytes are embedded (positions
enter as RoPE on each head's queries and keys, the engine's `rope` option); every layer runs
`multi_head_attention` with learned W_Q, W_K, W_V, W_O on the normalised residual stream and
adds its output to the stream; a final LayerNorm and W_U give next-byte logits. What each
head does is measured, not asserted (`head_scores`), on random printable sequences of 16 to
64 bytes typed twice, drawn from a fixed seed training never used.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Collection
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path

import numpy as np

from ..compute.engine import AttentionTrace, multi_head_attention
from ..compute.steps import merge_heads
from . import ablations

PRINTABLE = np.arange(32, 127, dtype=np.uint8)
SCORE_SEED = 20251130  # held-out sequences: training draws from its own seed
SCORE_SEQUENCES = 64
ABLATION_SEQUENCES = 16  # with heads off, scores are measured again on the first 16 (a request's time)
LABEL_THRESHOLD = 0.4  # a head is labelled by its highest score when that score is at least this

PATTERNS = {
    "previous_token": "previous token",
    "induction": "induction",
    "first_token": "first token",
    "self": "current token",
}


def read_safetensors(data: bytes) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """The safetensors layout: 8-byte little-endian header length, a JSON header, raw data."""
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    metadata = header.pop("__metadata__", {})
    dtypes = {"F32": "<f4", "F64": "<f8", "I64": "<i8"}
    base = 8 + length
    tensors = {}
    for name, entry in header.items():
        start, end = entry["data_offsets"]
        array = np.frombuffer(data[base + start : base + end], dtype=dtypes[entry["dtype"]])
        tensors[name] = array.reshape(entry["shape"])
    return tensors, metadata


@dataclass(frozen=True)
class Forward:
    """One pass: the bytes, each layer's full trace, and the next-byte distribution."""

    tokens: np.ndarray  # [n] uint8
    layers: list[AttentionTrace]  # each layer's attention, run on the normalised stream
    streams: list[np.ndarray]  # [n, d_model] the residual stream after each layer: stream + output
    probabilities: np.ndarray  # [n, 256] next-byte distribution at every position


class Shaped:
    """A model's shape, as its card states it."""

    card: dict

    @property
    def layers(self) -> int:
        return int(self.card["architecture"]["layers"])

    @property
    def heads(self) -> int:
        return int(self.card["architecture"]["heads"])

    @property
    def context(self) -> int:
        """The most positions it reads (bytes, or word pieces)."""
        return int(self.card["architecture"]["context"])

    @property
    def d_model(self) -> int:
        return int(self.card["architecture"]["d_model"])


@dataclass(frozen=True)
class Model(Shaped):
    id: str
    card: dict
    weights: dict[str, np.ndarray]  # float64
    card_dir: Path = Path()  # its card, weights and build-time ablations (content/models/<id>)

    kind = "bytes"  # what it reads: UTF-8 bytes, one position each
    causal = True
    patterns = PATTERNS

    @classmethod
    def load(cls, directory: Path) -> Model:
        card = json.loads((directory / "card.json").read_text())
        tensors, _ = read_safetensors((directory / "model.safetensors").read_bytes())
        return cls(directory.name, card, {k: v.astype(np.float64) for k, v in tensors.items()}, directory)

    @property
    def weights_file(self) -> Path:
        return self.card_dir / "model.safetensors"

    @property
    def rope(self) -> dict:
        return {"style": "half", "base": float(self.card["architecture"]["rope_base"])}

    def cells(self, text: str) -> int:
        """What a trace of `text` costs: every layer's attention on its bytes (up to the context)."""
        n = min(len(text.encode("utf-8", "surrogatepass")), self.context)
        return self.layers * (self.heads * n * n + n * self.d_model)

    @property
    def ablation_cells(self) -> int:
        """What measuring the scores again with heads off costs (sequences of up to `context` bytes)."""
        c = self.context
        return ABLATION_SEQUENCES * self.layers * (self.heads * c * c + c * self.d_model)

    def forward(self, tokens: np.ndarray, ablate: Collection[tuple[int, int]] = ()) -> Forward:
        """tokens [n] bytes (1 <= n <= context) -> every layer's trace and the next-byte probabilities.
        `ablate`: (layer, head) pairs, 0-based, switched off: their outputs zeroed before W_O."""
        x = self.weights["embed"][tokens]  # the residual stream [n, d_model]; positions come from RoPE
        traces, streams = [], []
        for layer in range(self.layers):
            w_q, w_k, w_v, w_o = (self.weights[f"layers.{layer}.{name}"] for name in ("w_q", "w_k", "w_v", "w_o"))
            trace = multi_head_attention(
                layer_norm(x), self.heads, causal=True, w_q=w_q, w_k=w_k, w_v=w_v, w_o=w_o, rope=self.rope
            )
            trace = switched_off(trace, [head for (at, head) in ablate if at == layer], w_o)
            x = x + trace.output  # [n, d_model]: the stream after this layer
            traces.append(trace)
            streams.append(x)
        logits = layer_norm(x) @ self.weights["unembed"]  # [n, 256]
        logits -= logits.max(axis=1, keepdims=True)
        probabilities = np.exp(logits)
        probabilities /= probabilities.sum(axis=1, keepdims=True)
        return Forward(np.asarray(tokens, dtype=np.uint8), traces, streams, probabilities)

    @cached_property
    def scores(self) -> np.ndarray:
        """[layers, heads, 4] mean previous-token, induction, first-token and self scores."""
        return head_scores(self, held_out_sequences(self.context))

    def measure_ablation(self, ablate: frozenset[tuple[int, int]]) -> np.ndarray:
        """[layers, heads, 4] `head_scores` with `ablate` off on the first ABLATION_SEQUENCES held-out sequences."""
        return head_scores(self, held_out_sequences(self.context)[:ABLATION_SEQUENCES], ablate)

    def ablation_scores(self, ablate: frozenset[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
        """[layers, heads, 4] twice: every head's scores with every head on, and with the `ablate`
        heads off, both on the first ABLATION_SEQUENCES held-out sequences."""
        return _ablated(self, frozenset()), _ablated(self, ablate)

    @cached_property
    def labels(self) -> list[list[str]]:
        return [[label(row) for row in layer] for layer in self.scores]


def _ablated(model: Model, ablate: frozenset[tuple[int, int]]) -> np.ndarray:
    """`head_scores` with `ablate` off on the first ABLATION_SEQUENCES held-out sequences."""
    return ablations.scores(model, ablate, lambda: model.measure_ablation(ablate))


def switched_off(
    trace: AttentionTrace, heads: list[int], w_o: np.ndarray, b_o: np.ndarray | None = None
) -> AttentionTrace:
    """The trace with `heads` off: their outputs zero, the concatenation and W_O's output redone
    (the heads' own Q, K, V, scores and weights are what they computed). An ablation as
    TransformerLens's hooks do it: the rest of the model reads only what the others wrote."""
    if not heads:
        return trace
    outputs = trace.head_outputs.copy()  # [H, n, d_head]
    outputs[heads] = 0.0
    concat = merge_heads(outputs)  # step 8 again: [H, n, d] -> [n, H*d]
    output = concat @ w_o if b_o is None else concat @ w_o + b_o  # [n, d_model]
    for array in (outputs, concat, output):
        array.setflags(write=False)
    return replace(trace, head_outputs=outputs, concat=concat, output=output, residual=trace.tokens + output)


def layer_norm(x: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    """[n, d] -> [n, d]: each row centred and scaled to unit variance (no learned affine)."""
    centred = x - x.mean(axis=1, keepdims=True)
    return centred / np.sqrt((centred**2).mean(axis=1, keepdims=True) + eps)


def repeated_sequences(rng: np.random.Generator, count: int, shortest: int = 16, longest: int = 64) -> list[np.ndarray]:
    """`count` random printable sequences of `shortest` .. `longest` bytes, each typed twice
    (so 2 x period bytes long). The period varies, so no fixed offset finds the earlier copy:
    only its content does; nothing precedes it, so each byte's earlier occurrence is (almost
    always) the one in the first copy."""
    periods = rng.integers(shortest, longest + 1, size=count)
    return [np.tile(rng.choice(PRINTABLE, size=int(period)), 2) for period in periods]


def held_out_sequences(context: int, count: int = SCORE_SEQUENCES, seed: int = SCORE_SEED) -> list[np.ndarray]:
    """The sequences the head scores are measured on (`repeated_sequences` from a fixed seed)."""
    return repeated_sequences(np.random.default_rng(seed), count, longest=context // 2)


def pattern_scores(weights: np.ndarray) -> np.ndarray:
    """weights [H, n, n] on a sequence typed twice (period n / 2) -> [H, 4]:
    - previous token: mean weight from each position i >= 1 to i - 1;
    - induction: mean weight from each position of the second copy (i >= period) to the
      byte after the earlier occurrence of its own byte, i - period + 1;
    - first token: mean weight from each position i >= 1 to position 0;
    - self: mean weight from each position i >= 1 to itself."""
    n = weights.shape[-1]
    period = n // 2
    rows = np.arange(1, n)
    second = np.arange(period, n)
    return np.stack(
        [
            weights[:, rows, rows - 1].mean(axis=1),
            weights[:, second, second - period + 1].mean(axis=1),
            weights[:, rows, 0].mean(axis=1),
            weights[:, rows, rows].mean(axis=1),
        ],
        axis=1,
    )


def head_scores(model: Model, sequences: list[np.ndarray], ablate: Collection[tuple[int, int]] = ()) -> np.ndarray:
    """[layers, heads, 4]: `pattern_scores` averaged over `sequences` (each typed twice)."""
    total = np.zeros((model.layers, model.heads, len(PATTERNS)))
    for sequence in sequences:
        for layer, trace in enumerate(model.forward(sequence, ablate).layers):
            total[layer] += pattern_scores(trace.weights)
    return total / len(sequences)


def label(scores: np.ndarray, patterns: dict[str, str] = PATTERNS) -> str:
    """A head's job: its highest pattern score's name when that score is at least the threshold."""
    best = int(np.argmax(scores))
    return list(patterns.values())[best] if scores[best] >= LABEL_THRESHOLD else "no single pattern"


def load_models(directory: str | Path) -> dict[str, Model]:
    """Every model under `directory` (one folder each, with model.safetensors and card.json)."""
    root = Path(directory)
    if not root.is_dir():
        return {}
    return {path.name: Model.load(path) for path in sorted(root.iterdir()) if (path / "card.json").is_file()}


def byte_text(value: int) -> str:
    """Printable ASCII as itself; every other byte as \\xNN (never U+FFFD)."""
    return chr(value) if 32 <= value < 127 else f"\\x{value:02x}"
