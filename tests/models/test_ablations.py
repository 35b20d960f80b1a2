"""Ablations measured once (issue 40): each head switched off alone is answered from the build's
file, which equals measuring it now; a learner switching heads off and on is charged a plain
trace's cost for what is known, so thirty clicks a minute are all answered."""

from __future__ import annotations

import numpy as np
import pytest

from service.app import create_app
from service.config import Settings
from service.models import ablations, load

MODELS = load(Settings.load())
BYTES = MODELS["bytes-2l-attn"]


@pytest.mark.parametrize("model_id", sorted(MODELS))
def test_the_builds_file_equals_measuring_every_single_head_ablation_now(model_id):
    model = MODELS[model_id]
    stored = ablations.measured(model)
    assert len(stored) == 1 + model.layers * model.heads  # every head on, and each head off alone
    for off in [frozenset(), frozenset({(0, 0)}), frozenset({(model.layers - 1, model.heads - 1)})]:
        # Equal to the last bits a machine's BLAS leaves alone: another CPU sums the same products in
        # another order (1e-16 apart here), which no score a learner reads (three decimals) can show.
        np.testing.assert_allclose(stored[off], model.measure_ablation(off), rtol=1e-12, atol=1e-15)


def test_a_file_measured_on_other_weights_is_not_used(tmp_path):
    from dataclasses import replace

    (tmp_path / "model.safetensors").write_bytes(BYTES.weights_file.read_bytes() + b" ")  # other weights
    (tmp_path / ablations.FILE).write_text((BYTES.card_dir / ablations.FILE).read_text())
    assert ablations.measured(replace(BYTES, card_dir=tmp_path)) == {}


def thirty_clicks(client, model, text):
    """A learner switching heads off and on: each click a trace with the heads now off."""
    statuses, off = [], set()
    for click in range(30):
        head = (click % model.layers, (click // model.layers) % model.heads)
        off ^= {head}  # switch it
        body = {"text": text, "ablate": [{"layer": layer, "head": h} for layer, h in sorted(off)][:1]}
        statuses.append(client.post(f"/api/v1/models/{model.id}/attention", json=body).status_code)
    return statuses


@pytest.mark.parametrize("model_id", sorted(MODELS))
def test_thirty_ablation_clicks_in_a_minute_are_all_answered(app_config, model_id):
    """The finding: an ablation was charged as a full re-measurement even when it was known, so a
    learner exploring the heads was refused after about twelve clicks a minute (budgets as served)."""
    app = create_app({**app_config, "ratelimit_enabled": True})
    client = app.test_client()
    client.post("/api/v1/session")
    statuses = thirty_clicks(client, MODELS[model_id], "def f(x): return x + 1")
    assert statuses == [200] * 30
    app.extensions["db"].dispose()


def test_an_unknown_set_of_heads_is_charged_once_then_free(app_config):
    budget = f"{BYTES.ablation_cells + 1_000_000}/minute"  # one measurement, and traces
    app = create_app(
        {**app_config, "ratelimit_enabled": True, "compute_budget_client": budget, "compute_budget_address": budget}
    )
    client, path = app.test_client(), f"/api/v1/models/{BYTES.id}/attention"
    heads = [{"layer": 0, "head": 1}, {"layer": 1, "head": 2}, {"layer": 1, "head": 3}]
    two, three = {"text": "abcabc", "ablate": heads[:2]}, {"text": "abcabc", "ablate": heads}
    assert [client.post(path, json=two).status_code for _ in range(10)] == [200] * 10  # measured once, then known
    assert client.post(path, json=three).status_code == 429  # another set: a measurement the budget has no room for
    app.extensions["db"].dispose()
