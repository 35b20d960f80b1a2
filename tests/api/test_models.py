"""The trained model through the API: heads labelled by measured scores that hold on fresh
sequences, every layer's trace, next-byte predictions, and clean 4xx for bad text."""

from __future__ import annotations

import numpy as np
import pytest

from service.models.byte_model import held_out_sequences

URL = "/api/v1/models/bytes-2l-attn/attention"


@pytest.fixture(scope="module")
def listing(tmp_path_factory):
    from service.app import create_app

    app = create_app({"env": "testing", "database_url": f"sqlite:///{tmp_path_factory.mktemp('m') / 'x.db'}"})
    models = app.test_client().get("/api/v1/models").json["models"]
    return [m for m in models if m["id"] == "bytes-2l-attn"]  # with the minilm extra, the encoder follows


def labelled(listing, wanted: str) -> list[tuple[int, int]]:
    return [
        (layer, head["index"])
        for layer, heads in enumerate(listing[0]["layer_heads"])
        for head in heads
        if head["label"] == wanted
    ]


def test_the_model_is_listed_with_every_heads_label_and_scores(listing):
    (model,) = listing
    assert (model["id"], model["layers"], model["heads"], model["context"]) == ("bytes-2l-attn", 2, 4, 128)
    assert model["causal"] is True and model["reads"] == "UTF-8 bytes"
    assert model["licence"]["text"].startswith("PSF")
    assert all(
        set(h["pattern_scores"]) == {"previous_token", "induction", "first_token", "self"}
        for heads in model["layer_heads"]
        for h in heads
    )
    assert {layer for layer, _ in labelled(listing, "previous token")} == {0}  # composition needs the first layer
    assert {layer for layer, _ in labelled(listing, "induction")} == {1}


def test_labelled_heads_do_their_job_on_fresh_sequences_through_the_api(client, listing):
    previous, induction = labelled(listing, "previous token"), labelled(listing, "induction")
    assert previous and induction
    fresh = held_out_sequences(128, count=8, seed=4242)  # neither training's seed nor the scoring one
    totals: dict[tuple[int, int], list[float]] = {key: [] for key in previous + induction}
    for sequence in fresh:
        text, period = bytes(sequence).decode("ascii"), len(sequence) // 2
        body = client.post(URL, json={"text": text, "include": ["weights"]}).json
        for layer, head in totals:
            w = np.array(body["layers"][layer]["heads"][head]["weights"])
            if (layer, head) in previous:
                totals[(layer, head)].append(np.mean([w[i, i - 1] for i in range(1, 2 * period)]))
            else:
                totals[(layer, head)].append(np.mean([w[i, i - period + 1] for i in range(period, 2 * period)]))
    assert max(np.mean(totals[k]) for k in previous) >= 0.8
    assert max(np.mean(totals[k]) for k in induction) >= 0.5


def induction_scores(client, texts: list[str], ablate: list[dict]) -> dict[int, float]:
    """Layer 2's heads' mean weight, over the second copy, to the byte after the earlier
    occurrence of each byte (a plain loop over the weights the API returns)."""
    found: dict[int, list[float]] = {}
    for text in texts:
        period = len(text) // 2
        body = client.post(URL, json={"text": text, "include": ["weights"], "ablate": ablate}).json
        for head in body["layers"][1]["heads"]:
            w = head["weights"]
            found.setdefault(head["index"], []).append(
                sum(w[i][i - period + 1] for i in range(period, 2 * period)) / period
            )
    return {head: float(np.mean(values)) for head, values in found.items()}


def test_switching_off_the_previous_token_head_breaks_the_induction_heads(client, listing):
    """K-composition (Elhage et al. 2021): layer 2's induction heads find "the byte after the
    earlier copy of mine" through the previous-token head's output; without it they cannot.
    Switching off a head with no job leaves them as they were."""
    (previous,) = labelled(listing, "previous token")
    induction = [head for layer, head in labelled(listing, "induction") if layer == 1]
    idle = [(layer, head) for layer, head in labelled(listing, "no single pattern") if layer == 0]
    assert induction and idle
    rng = np.random.default_rng(777)
    alphabet = [chr(c) for c in range(33, 127)]
    texts = ["".join(rng.choice(alphabet, size=int(rng.integers(16, 48)))) * 2 for _ in range(8)]
    intact = induction_scores(client, texts, [])
    without_previous = induction_scores(client, texts, [{"layer": previous[0], "head": previous[1]}])
    for head in induction:
        assert without_previous[head] <= intact[head] / 2, (head, intact[head], without_previous[head])
    for layer, off in idle:
        without_idle = induction_scores(client, texts, [{"layer": layer, "head": off}])
        for head in induction:
            assert without_idle[head] > intact[head] / 2, (off, head, intact[head], without_idle[head])


def test_an_ablation_reports_the_heads_off_and_their_effect_on_every_heads_scores(client, listing):
    (previous,) = labelled(listing, "previous token")
    ablate = [{"layer": previous[0], "head": previous[1]}]
    body = client.post(URL, json={"text": "abcabc", "ablate": ablate, "include": ["heads.output"]}).json
    assert body["ablated"] == ablate
    heads = body["layers"][previous[0]]["heads"]
    assert [h["off"] for h in heads] == [h["index"] == previous[1] for h in heads]
    assert [any(any(row) for row in h["output"]) for h in heads] == [not h["off"] for h in heads]  # its output is 0
    for layer in body["layers"]:
        for head in layer["heads"]:
            assert set(head["ablation"]) == {"intact", "ablated"}
    induction = [head for layer, head in labelled(listing, "induction") if layer == 1]
    scores = body["layers"][1]["heads"][induction[0]]["ablation"]
    assert scores["ablated"]["induction"] < scores["intact"]["induction"] / 2


@pytest.mark.parametrize(
    "ablate, field",
    [
        ([{"layer": 2, "head": 0}], "ablate"),
        ([{"layer": 0, "head": 4}], "ablate"),
        ([{"layer": -1, "head": 0}], "ablate"),
        ([{"layer": 0}], "ablate"),
        ("layer 0", "ablate"),
        ([{"layer": 0, "head": 0}] * 65, "ablate"),
    ],
)
def test_an_ablation_of_a_head_the_model_lacks_is_a_422_naming_it(client, ablate, field):
    response = client.post(URL, json={"text": "abc", "ablate": ablate})
    assert response.status_code == 422 and response.mimetype == "application/problem+json"
    assert any(key.startswith(field) for key in response.json["errors"]), response.json


def test_a_repeat_is_continued(client):
    body = client.post(URL, json={"text": "Kx7#qPz2!mW4vR9&Kx7#qPz2!mW4v", "top": 3}).json
    assert body["next"][0]["text"] == "R"
    probabilities = [p["probability"] for p in body["next"]]
    assert probabilities == sorted(probabilities, reverse=True) and 0 < probabilities[0] <= 1


def test_the_prediction_after_any_byte_is_the_models_for_the_text_ending_there(client):
    """after[i] is what the model predicts had the text stopped at byte i: the same as asking for
    that prefix alone (the model is causal), and the last is `next`."""
    text = "Kx7#qPz2!mW4vR9&Kx7#qP"
    whole = client.post(URL, json={"text": text, "top": 3}).json
    assert len(whole["after"]) == len(text) and whole["after"][-1] == whole["next"]
    for i in (0, 5, 17):
        prefix = client.post(URL, json={"text": text[: i + 1], "top": 3}).json["next"]
        assert [p["byte"] for p in whole["after"][i]] == [p["byte"] for p in prefix]
        assert [p["probability"] for p in whole["after"][i]] == pytest.approx([p["probability"] for p in prefix])
        assert {p["index"] for p in whole["after"][i]} == {i + 1}
    assert whole["after"][17][0]["text"] == "7"  # inside the repeat: the byte that followed "x" before


def test_every_layer_carries_the_workbench_trace(client):
    body = client.post(URL, json={"text": "abc", "precision": 3}).json
    assert [t["text"] for t in body["tokens"]] == ["a", "b", "c"] and body["shape"]["n"] == 3
    for layer in body["layers"]:
        assert {"concat", "output", "residual"} <= set(layer) and len(layer["heads"]) == 4
        for head in layer["heads"]:
            assert {"query", "key", "value", "scores", "masked_scores", "weights", "output", "label"} <= set(head)
            assert np.allclose(np.array(head["weights"]).sum(axis=1), 1, atol=2e-3)
    # The second layer reads the first one's residual stream.
    assert body["layers"][1]["shape"] == body["layers"][0]["shape"]


def test_bytes_outside_printable_ascii_are_shown_as_hex_never_replaced(client):
    body = client.post(URL, json={"text": "a\t\n\u00e9\U0001f600"}).json
    texts = [t["text"] for t in body["tokens"]]
    assert texts == ["a", "\\x09", "\\x0a", "\\xc3", "\\xa9", "\\xf0", "\\x9f", "\\x98", "\\x80"]
    assert "\ufffd" not in str(body["tokens"])


@pytest.mark.parametrize(
    "data, status, field",
    [
        (b'{"text": ""}', 422, "text"),
        (b'{"text": 5}', 422, "text"),
        (b'{"text": null}', 422, "text"),
        (b"{}", 422, "text"),
        (b'{"text": "a", "colour": 1}', 422, "colour"),
        (b'{"text": "a", "top": 0}', 422, "top"),
        (('{"text": "' + "x" * 129 + '"}').encode(), 413, "text"),
        (('{"text": "' + "\u00e9" * 65 + '"}').encode(), 413, "text"),  # 130 bytes in UTF-8
        (b'{"text": "\xff\xfe"}', 400, None),  # not UTF-8
        (b'{"text": "\\ud800"}', 400, None),  # a lone surrogate is no text
        (b'{"text": "a\\u0000b"}', 422, "text"),  # control characters: NUL,
        (b'{"text": "\\u001b[31m"}', 422, "text"),  # an escape sequence,
        (b'{"text": "a\\u007f"}', 422, "text"),  # DEL,
        (b'{"text": "a\\u0085"}', 422, "text"),  # a C1 control
    ],
)
def test_bad_text_is_a_clean_4xx(client, data, status, field):
    response = client.post(URL, data=data, content_type="application/json")
    assert response.status_code == status and response.mimetype == "application/problem+json"
    if field:
        assert field in response.json["errors"]


def test_the_context_is_counted_in_bytes(client):
    assert client.post(URL, json={"text": "\u00e9" * 64}).status_code == 200  # 128 bytes


def test_an_unknown_model_is_404(client):
    response = client.post("/api/v1/models/gpt-5/attention", json={"text": "a"})
    assert response.status_code == 404 and "bytes-2l-attn" in response.json["detail"]


def test_openapi_documents_the_model_endpoints(client):
    paths = client.get("/api/v1/openapi.json").json["paths"]
    assert "/api/v1/models" in paths and "/api/v1/models/{model_id}/attention" in paths


def test_the_lesson_links_the_page_and_cites_the_papers(client):
    html = client.get("/api/v1/lessons/multi-head-attention").json["html"]
    assert 'href="/explorables/trained-heads"' in html and 'href="/figures/four-heads"' in html
    assert "Elhage et al. (2021" in html and "Olsson et al. (2022" in html and "K-composition" in html


def test_without_the_extra_only_the_byte_model_is_listed(tmp_path, monkeypatch):
    from service.app import create_app
    from service.models import encoder as enc

    monkeypatch.setattr(enc, "weights_path", lambda: None)
    app = create_app({"env": "testing", "database_url": f"sqlite:///{tmp_path / 'x.db'}"})
    client = app.test_client()
    assert [m["id"] for m in client.get("/api/v1/models").json["models"]] == ["bytes-2l-attn"]
    response = client.post("/api/v1/models/all-minilm-l6-v2/attention", json={"text": "hello"})
    assert response.status_code == 404 and "bytes-2l-attn" in response.json["detail"]
