"""The pretrained encoder (all-MiniLM-L6-v2, the minilm extra) in numpy, each layer's attention
the engine's: parity with transformers' BERT, an exact GELU, and a card that says what the
service measures. Skipped, with the reason, where the extra is not installed."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from service.models import encoder as enc

CARDS = Path(__file__).resolve().parents[2] / "content" / "encoders"
needs_extra = pytest.mark.skipif(
    not enc.available(), reason="the minilm extra is not installed (make minilm; .ci/run installs it)"
)
SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Unbelievably, the café in Zürich sells 東京 tea!",
    "a",
    "Attention heads are small, and there are many of them; each reads the whole sentence at once.",
]


@pytest.fixture(scope="module")
def minilm():
    if not enc.available():
        pytest.skip("the minilm extra is not installed (make minilm; .ci/run installs it)")
    return enc.load_encoders(CARDS)["all-minilm-l6-v2"]


def test_gelu_is_the_exact_one_bert_uses():
    x = np.linspace(-12, 12, 4801)
    exact = np.array([v * 0.5 * (1 + math.erf(v / math.sqrt(2))) for v in x])  # a plain loop over math.erf
    np.testing.assert_allclose(enc.gelu(x), exact, rtol=0, atol=1e-6)


def test_pattern_scores_match_a_plain_loop():
    rng = np.random.default_rng(3)
    w = rng.random((2, 7, 7))
    w /= w.sum(axis=-1, keepdims=True)
    scores = enc.pattern_scores(w)
    for h in range(2):
        rows = range(1, 6)
        expected = [
            np.mean([w[h, i, i - 1] for i in rows]),
            np.mean([w[h, i, i + 1] for i in rows]),
            np.mean([w[h, i, 0] for i in rows]),
            np.mean([w[h, i, 6] for i in rows]),
            np.mean([w[h, i, i] for i in rows]),
        ]
        np.testing.assert_allclose(scores[h], expected, atol=1e-12)


@needs_extra
def test_every_layers_attention_and_the_hidden_states_match_transformers(minilm):
    torch = pytest.importorskip("torch", reason="torch is test-only (.ci/run installs torch==2.13.0)")
    transformers = pytest.importorskip("transformers", reason="transformers is test-only (.ci/run installs it)")
    bert = transformers.BertModel.from_pretrained(str(enc.weights_path()), attn_implementation="eager").eval()
    for sentence in SENTENCES:
        pieces = minilm.tokenize(sentence)
        forward = minilm.forward(pieces)
        with torch.no_grad():
            out = bert(torch.from_numpy(pieces.ids)[None], output_attentions=True, output_hidden_states=True)
        assert len(forward.layers) == len(out.attentions) == 6
        for layer, (trace, theirs) in enumerate(zip(forward.layers, out.attentions, strict=True)):
            np.testing.assert_allclose(trace.weights, theirs[0].numpy(), rtol=0, atol=1e-5, err_msg=f"layer {layer}")
            np.testing.assert_allclose(forward.streams[layer], out.hidden_states[layer + 1][0].numpy(), atol=1e-4)
        np.testing.assert_allclose(forward.streams[-1], out.last_hidden_state[0].numpy(), rtol=0, atol=1e-4)


@needs_extra
def test_word_pieces_come_from_the_wheels_vocabulary(minilm):
    pieces = minilm.tokenize("Unbelievably simple")
    assert pieces.pieces[0] == "[CLS]" and pieces.pieces[-1] == "[SEP]"
    assert pieces.pieces[1:-1] == ["un", "##bel", "##ie", "##va", "##bly", "simple"]
    vocabulary = (enc.weights_path() / "vocab.txt").read_text().splitlines()
    assert [vocabulary[i] for i in pieces.ids] == pieces.pieces


@needs_extra
def test_the_card_records_what_the_service_measures(minilm):
    """Labels chosen on one set of sentences, scores measured on the other: both as the card says."""
    measured = enc.measure(minilm)
    assert measured["labels"] == minilm.card["head_scores"]["labels"]
    np.testing.assert_allclose(measured["layers"], minilm.card["head_scores"]["layers"], atol=1e-4)
    assert not set(minilm.sentences["choose"]) & set(minilm.sentences["held_out"])


@needs_extra
def test_a_switched_off_head_adds_nothing_before_w_o(minilm):
    pieces = minilm.tokenize("the cat sat on the mat")
    ablated, intact = minilm.forward(pieces, {(0, 2)}), minilm.forward(pieces)
    np.testing.assert_allclose(ablated.layers[0].weights, intact.layers[0].weights)  # it still looks
    assert not ablated.layers[0].head_outputs[2].any()
    w_o = minilm.weights["encoder.layer.0.attention.output.dense.weight"].T  # [in][out]
    d_head = 32
    expected = intact.layers[0].output - intact.layers[0].head_outputs[2] @ w_o[2 * d_head : 3 * d_head]
    np.testing.assert_allclose(ablated.layers[0].output, expected, atol=1e-10)
    assert not np.allclose(ablated.streams[-1], intact.streams[-1])
