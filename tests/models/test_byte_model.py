"""The trained model: the committed file is what its card says, numpy inference equals the torch
model that trained it, and the head scores are what a plain loop measures."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from service.compute import multi_head_attention
from service.models.byte_model import (
    PATTERNS,
    Model,
    byte_text,
    held_out_sequences,
    label,
    layer_norm,
    load_models,
    pattern_scores,
    read_safetensors,
)

MODELS = Path(__file__).resolve().parents[2] / "content" / "models"
MODEL_DIR = MODELS / "bytes-2l-attn"


@pytest.fixture(scope="module")
def model() -> Model:
    return load_models(MODELS)["bytes-2l-attn"]


def test_the_committed_weights_are_the_ones_the_card_describes(model):
    card = json.loads((MODEL_DIR / "card.json").read_text())
    data = (MODEL_DIR / "model.safetensors").read_bytes()
    assert hashlib.sha256(data).hexdigest() == card["sha256"]
    arch = card["architecture"]
    d, layers = arch["d_model"], arch["layers"]
    assert model.weights["embed"].shape == (256, d) and model.weights["unembed"].shape == (d, 256)
    assert {f"layers.{i}.{w}" for i in range(layers) for w in ("w_q", "w_k", "w_v", "w_o")} <= set(model.weights)
    assert sum(w.size for w in model.weights.values()) == arch["parameters"]
    assert card["licences"]["text"].startswith("PSF") and card["training"]["seed"] == 0


def test_the_cards_head_scores_are_what_the_service_measures(model):
    card = json.loads((MODEL_DIR / "card.json").read_text())
    assert card["head_scores"]["patterns"] == list(PATTERNS)
    np.testing.assert_allclose(model.scores, card["head_scores"]["layers"], atol=6e-5)  # the card rounds to 4 places


def loop_scores(weights: np.ndarray) -> list[list[float]]:
    """The four pattern scores of each head on a sequence typed twice, by plain loops."""
    heads, n, _ = weights.shape
    period = n // 2
    out = []
    for h in range(heads):
        previous = sum(weights[h, i, i - 1] for i in range(1, n)) / (n - 1)
        induction = sum(weights[h, i, i - period + 1] for i in range(period, n)) / period
        first = sum(weights[h, i, 0] for i in range(1, n)) / (n - 1)
        itself = sum(weights[h, i, i] for i in range(1, n)) / (n - 1)
        out.append([previous, induction, first, itself])
    return out


def test_pattern_scores_match_a_plain_loop():
    rng = np.random.default_rng(3)
    for n in (6, 16):
        raw = rng.random((3, n, n)) * np.tril(np.ones((n, n)))
        weights = raw / raw.sum(axis=2, keepdims=True)
        np.testing.assert_allclose(pattern_scores(weights), loop_scores(weights), rtol=1e-12)


def test_the_scoring_sequences_are_typed_twice_with_varying_periods():
    sequences = held_out_sequences(128, count=20, seed=1)
    assert len({len(s) for s in sequences}) > 5  # no fixed offset finds the earlier copy
    for sequence in sequences:
        period = len(sequence) // 2
        assert 16 <= period <= 64 and (sequence[period:] == sequence[:period]).all()
        assert ((32 <= sequence) & (sequence < 127)).all()


def test_a_head_is_labelled_by_its_highest_score_only_when_it_is_clear():
    assert label(np.array([0.9, 0.1, 0.0, 0.0])) == "previous token"
    assert label(np.array([0.1, 0.6, 0.2, 0.0])) == "induction"
    assert label(np.array([0.3, 0.3, 0.3, 0.1])) == "no single pattern"


def test_bytes_outside_printable_ascii_are_hex():
    shown = [byte_text(b) for b in (65, 32, 126, 10, 0, 127, 0xC3, 0xFF)]
    assert shown == ["A", " ", "~", "\\x0a", "\\x00", "\\x7f", "\\xc3", "\\xff"]


def test_the_safetensors_reader_reads_what_the_reference_library_writes(tmp_path):
    from safetensors.numpy import save

    arrays = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.ones((1, 4), dtype=np.float64)}
    tensors, _ = read_safetensors(save(arrays))
    for name, array in arrays.items():
        np.testing.assert_array_equal(tensors[name], array)


def test_numpy_inference_equals_the_torch_model_that_trained_it(model):
    torch = pytest.importorskip("torch", reason="torch is training-only (.ci/run installs torch==2.13.0)")
    from training.model import AttentionOnly

    arch = model.card["architecture"]
    reference = AttentionOnly(arch["d_model"], arch["heads"], arch["layers"], arch["context"], arch["rope_base"])
    reference = reference.double()
    with torch.no_grad():
        for name in reference.tensors():
            target = dict(reference.named_parameters())[_parameter(name)]
            target.copy_(torch.from_numpy(model.weights[name]))
    (repeat,) = held_out_sequences(model.context, 1, seed=7)
    for text in (b"def f(x):\n    return x", bytes(repeat), b"A"):
        tokens = np.frombuffer(text, dtype=np.uint8)
        kept: list = []
        with torch.no_grad():
            logits = reference(torch.from_numpy(tokens.astype(np.int64))[None], keep=kept)[0]
        forward = model.forward(tokens)
        np.testing.assert_allclose(forward.probabilities, logits.softmax(-1).numpy(), atol=1e-6)
        for trace, weights in zip(forward.layers, kept, strict=True):
            np.testing.assert_allclose(trace.weights, weights[0].numpy(), atol=1e-6)


def _parameter(name: str) -> str:
    """'layers.1.w_q' -> 'w_q.1' (a ParameterList entry); other names are themselves."""
    if name.startswith("layers."):
        _, layer, weight = name.split(".")
        return f"{weight}.{layer}"
    return name


def test_a_switched_off_head_contributes_nothing_and_the_rest_is_computed_as_usual(model):
    """Ablation by a plain loop: layer by layer, the stream gains the sum over the heads still on
    of head_output_h @ (W_O's rows for head h); the layer after reads that stream."""
    tokens = np.frombuffer(b"the cat sat; the cat sat", dtype=np.uint8)
    off = {(0, 0), (1, 2)}
    ablated = model.forward(tokens, off)
    d_head = model.card["architecture"]["d_model"] // model.heads
    x = model.weights["embed"][tokens]
    for layer in range(model.layers):
        w = {name: model.weights[f"layers.{layer}.{name}"] for name in ("w_q", "w_k", "w_v", "w_o")}
        intact = multi_head_attention(layer_norm(x), model.heads, rope=model.rope, **w)
        np.testing.assert_allclose(ablated.layers[layer].weights, intact.weights, atol=1e-12)  # it still looks
        added = np.zeros_like(x)
        for h in range(model.heads):
            if (layer, h) not in off:
                added += intact.head_outputs[h] @ w["w_o"][h * d_head : (h + 1) * d_head]
        np.testing.assert_allclose(ablated.streams[layer], x + added, atol=1e-10)
        x = x + added
    assert not np.allclose(ablated.probabilities, model.forward(tokens).probabilities)
