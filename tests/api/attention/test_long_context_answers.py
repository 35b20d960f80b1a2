"""Long contexts through the API: each slip found by /attention/compare at its stage, both caches'
sizes said, the decode's RoPE positions under StreamingLLM's renumbering, and what is refused."""

import numpy as np
import pytest

from service.compute.failure_modes import REGISTRY

from ...compute.plain_python import LONG_CONTEXT_SLIPS, reference_streaming, slip_context

RNG = np.random.default_rng(21)
X = RNG.normal(size=(9, 8)).round(3)
W = {name: RNG.normal(size=(8, 8)).round(3) for name in ("query", "key", "value", "output")}
ROPE = {"style": "half", "base": 10000.0}

# Where each slip first shows: the weights for every mask slip; the scores for keys turned at the
# text's positions (the queries are the same, each step turns its keys anew); nowhere for a cache
# that keeps too much, whose numbers are right.
FIRST = {
    "decode_ignores_window": "weights",
    "window_off_by_one": "weights",
    "sinks_evicted": "weights",
    "sink_logit_ignored": "weights",
    "positions_from_text": "scores",
    "cache_not_truncated": None,
}


def post(client, path, body, status=200):
    response = client.post("/api/v1/attention" + path, json=body)
    assert response.status_code == status, response.json
    return response.json


def body(mode=None, **extra):
    projections = {name: w.tolist() for name, w in W.items()}
    return {"tokens": X.tolist(), "heads": 2, "projections": projections, **slip_context(mode, 2, 4), **extra}


@pytest.mark.parametrize("mode", LONG_CONTEXT_SLIPS)
def test_compare_finds_each_long_context_slip_at_its_stage(client, mode):
    result = post(client, "/compare", body(mode, failure_mode=mode))
    assert result["divergence"]["first"] == FIRST[mode]
    context = {k: v for k, v in slip_context(mode, 2, 4).items() if k != "causal"}
    ref = reference_streaming(
        X.tolist(),
        2,
        failure_mode=mode,
        prefill=1 if REGISTRY[mode].decoding else 9,
        **context,
        **{f"w_{n[0]}": w.tolist() for n, w in W.items()},
    )
    np.testing.assert_allclose(result["broken"]["output"], ref["output"], rtol=0, atol=1e-11)
    n, per_token = 9, 2 * 2 * 4  # a key and a value per head of 4
    window, sinks = context["window"], context["sinks"]
    right = min(n, window + sinks) * per_token
    broken = {
        "cache_not_truncated": n,
        "decode_ignores_window": n,
        "window_off_by_one": window + 1 + sinks,
        "sinks_evicted": window,
    }.get(mode, window + sinks) * per_token
    assert result["correct"]["cache"]["elements"] == right and result["broken"]["cache"]["elements"] == broken


def test_a_renumbered_decode_says_where_rope_turned_each_step(client):
    tokens = np.random.default_rng(4).normal(size=(11, 8)).round(3).tolist()
    result = post(client, "/decode", body(window=4, sinks=4, positions="cache", rope=ROPE, tokens=tokens))
    step = result["steps"][9]
    assert sorted(step["cache_positions"]) == [0, 1, 2, 3, 6, 7, 8, 9]
    places = dict(zip(step["cache_positions"], step["rope_positions"]["keys"], strict=True))
    assert step["rope_positions"]["query"] == 7 and places == {0: 0, 1: 1, 2: 2, 3: 3, 6: 4, 7: 5, 8: 6, 9: 7}
    first = result["steps"][3]  # nothing evicted yet: the text's positions
    assert first["rope_positions"] == {"query": 3, "keys": [0, 1, 2, 3]}
    assert result["max_difference_from_full_pass"] > 1e-6  # after eviction the renumbered decode parts from the pass


def test_a_pass_under_renumbering_is_the_renumbered_decode_laid_out(client):
    decoded = post(client, "/decode", body(window=3, sinks=1, positions="cache", rope=ROPE))
    laid_out = post(client, "", body(window=3, sinks=1, positions="cache", rope=ROPE))
    np.testing.assert_allclose(laid_out["output"], [s["output"] for s in decoded["steps"]], rtol=0, atol=1e-12)
    assert laid_out["long_context"]["positions"] == "cache"


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"positions": "cache", "window": 3}, "positions"),
        ({"positions": "somewhere", "window": 3, "rope": ROPE}, "positions"),
        ({"failure_mode": "sinks_evicted", "window": 3}, "failure_mode"),
        ({"failure_mode": "cache_not_truncated"}, "failure_mode"),
    ],
)
def test_what_a_long_context_request_lacks_is_named(client, extra, field):
    problem = post(client, "/compare" if "failure_mode" in extra else "", body(**extra), status=422)
    assert field in problem["errors"]


def test_the_tiles_take_no_renumbering(client):
    problem = post(
        client, "/tiled", {**body(window=3, positions="cache", rope=ROPE), "block_q": 3, "block_k": 3}, status=422
    )
    assert "positions" in problem["errors"]
