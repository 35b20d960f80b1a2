"""POST /models/{id}/lens and /models/{id}/patch as a platform calls them: the lens's last layer is the
model's next-byte distribution, the patch grid answers every cell with its estimate, a pitfall is shown
beside the right computation with its first difference, and what cannot be computed is a 4xx naming why."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.usefixtures("app")

LENS = "/api/v1/models/bytes-2l-attn/lens"
PATCH = "/api/v1/models/bytes-2l-attn/patch"
INDUCTION = {"clean": "q8Lm3Zk7q8Lm3", "corrupted": "q8Lm3Yk7q8Lm3"}
METRIC = {"kind": "logit_difference", "bytes": [ord("Z"), ord("Y")]}


def test_the_lens_of_the_last_layer_is_what_the_model_predicts(client):
    text = "q8Lm3Zk7q8Lm3"
    lens = client.post(LENS, json={"text": text, "top": 4}).json
    trace = client.post("/api/v1/models/bytes-2l-attn/attention", json={"text": text, "top": 4}).json
    last = lens["layers"][-1]["positions"]
    for position, predicted in enumerate(trace["after"]):
        assert [(t["byte"], t["probability"]) for t in last[position]["top"]] == [
            (p["byte"], p["probability"]) for p in predicted
        ]
    assert [layer["layer"] for layer in lens["layers"]] == [0, 1, 2]
    assert len(lens["heads"]) == 8 and lens["heads"][4]["label"] == "induction"
    nxt = last[4]["next"]  # after the first "3" comes "Z", which nothing before it predicts
    every = client.post("/api/v1/models/bytes-2l-attn/attention", json={"text": text, "top": 256}).json["after"][4]
    assert nxt["text"] == "Z" and nxt["rank"] == 1 + sum(p["probability"] > nxt["probability"] for p in every)


def test_a_lens_pitfall_is_shown_with_where_it_first_differs(client):
    body = client.post(LENS, json={"text": "q8Lm3Zk7q8Lm3", "failure_mode": "lens_without_final_norm"}).json
    first = body["first_difference"]
    assert (first["layer"], first["position"]) == (0, 0) and "no final LayerNorm" in body["norm"]
    assert first["right"]["top"] != first["broken"]["top"]


def test_the_patch_grid_finds_the_induction_heads_and_estimates_each_cell(client):
    body = client.post(PATCH, json={**INDUCTION, "metric": METRIC, "estimate": True}).json
    effect, estimate = np.array(body["effect"]), np.array(body["estimate"])
    assert body["shape"] == [2, 4, 13]
    assert body["clean"]["metric"] > 0 > body["corrupted"]["metric"]  # Z after the copy, Y when the first copy says Y
    layer, head, position = np.unravel_index(np.abs(effect).argmax(), effect.shape)
    assert (layer, position) == (1, 12) and head in (0, 1)  # an induction head, at the last position
    np.testing.assert_allclose(np.array(body["patched"]) - body["corrupted"]["metric"], effect, atol=1e-12)
    shares = np.array([[[np.nan if v is None else v for v in row] for row in layer] for layer in body["recovered"]])
    known = np.isfinite(shares)
    np.testing.assert_allclose(shares[known], estimate[known] / effect[known], rtol=1e-12)
    residual = client.post(PATCH, json={**INDUCTION, "metric": METRIC, "component": "residual"}).json
    assert residual["shape"] == [3, 13] and residual["patched"][2][12] == residual["clean"]["metric"]


def test_a_patching_pitfall_comes_with_the_right_grid_and_its_first_difference(client):
    body = client.post(
        PATCH, json={**INDUCTION, "metric": METRIC, "estimate": True, "failure_mode": "gradient_through_frozen_softmax"}
    ).json
    assert body["effect"] == body["correct"]["effect"] and body["estimate"] != body["correct"]["estimate"]
    assert body["first_difference"]["what"] == "estimate"


@pytest.mark.parametrize(
    "body, status, field",
    [
        ({"clean": "abc", "corrupted": "ab", "metric": METRIC}, 422, "corrupted"),
        ({"clean": "abc", "corrupted": "abd", "metric": {"kind": "logit_difference"}}, 422, "metric.bytes"),
        ({"clean": "abc", "corrupted": "abd", "metric": {"kind": "probability"}}, 422, "metric.byte"),
        ({"clean": "é" * 40, "corrupted": "é" * 40, "metric": METRIC}, 413, "clean"),
        ({"clean": "abc", "corrupted": "abd", "metric": METRIC, "failure_mode": "lens_without_final_norm"}, 422, None),
    ],
)
def test_what_a_patch_cannot_compute_is_a_4xx_naming_it(client, body, status, field):
    answer = client.post(PATCH, json=body)
    assert answer.status_code == status and answer.mimetype == "application/problem+json", answer.json
    if field:
        assert field in answer.json["errors"], answer.json
