"""Every valid input at the edges of the contract computes, through HTTP: d_head 1, one token,
one head, one kv head, every include subset, every precision. Never a 500, never a NaN."""

from __future__ import annotations

import math

import numpy as np
import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.compute import FAILURE_MODES
from service.compute.failure_modes import REGISTRY
from service.trace_json import INCLUDE_CHOICES

from ..compute.plain_python import ROPE_SLIPS, slip_context

LAYOUTS = [
    (d_model, heads, kv)
    for d_model in range(1, 9)
    for heads in range(1, 9)
    if d_model % heads == 0
    for kv in range(1, heads + 1)
    if heads % kv == 0
]


@st.composite
def requests(draw):
    d_model, heads, kv_heads = draw(st.sampled_from(LAYOUTS))
    n = draw(st.integers(1, 5))
    tokens = draw(
        st.lists(
            st.lists(st.floats(-50, 50, allow_nan=False, width=32), min_size=d_model, max_size=d_model),
            min_size=n,
            max_size=n,
        )
    )
    body = {"tokens": tokens, "heads": heads, "causal": draw(st.booleans())}
    if kv_heads != heads or draw(st.booleans()):
        body["kv_heads"] = kv_heads
    if draw(st.booleans()):
        body["include"] = draw(st.lists(st.sampled_from(INCLUDE_CHOICES), min_size=1, max_size=4, unique=True))
    if draw(st.booleans()):
        body["precision"] = draw(st.integers(0, 15))
    mode = draw(st.sampled_from([None, *sorted(FAILURE_MODES)]))
    turned = mode == "positions_from_text" or mode in ROPE_SLIPS  # a slip that RoPE (slip_context's) shows
    odd = turned and (d_model // heads) % 2  # RoPE turns pairs: nothing to turn
    if mode and not (mode == "reuse_first_slice" and kv_heads != heads) and not odd:
        body["failure_mode"] = mode
        if REGISTRY[mode].decoding:  # only decoding makes it, and decoding is causal (else a 422 naming it)
            body["causal"] = True
        body.update(slip_context(mode, heads, d_model // heads))  # a long-context slip needs its window
    return body


def finite_everywhere(value) -> bool:
    if isinstance(value, dict):
        return all(finite_everywhere(v) for v in value.values())
    if isinstance(value, list):
        return all(finite_everywhere(v) for v in value)
    return not isinstance(value, float) or math.isfinite(value)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=requests())
def test_every_small_valid_request_computes(client, body):
    response = client.post("/api/v1/attention", json=body)
    assert response.status_code == 200, (body, response.data[:300])
    result = orjson.loads(response.data)
    assert finite_everywhere(result)
    assert result["shape"]["d_head"] * result["shape"]["heads"] == len(body["tokens"][0])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=requests(), mode=st.sampled_from(sorted(FAILURE_MODES)))
def test_every_small_valid_comparison_computes(client, body, mode):
    if mode == "reuse_first_slice" and body.get("kv_heads", body["heads"]) != body["heads"]:
        mode = "no_scaling"
    if REGISTRY[mode].decoding:
        body = {**body, "causal": True}
    body = {k: v for k, v in body.items() if k not in ("window", "sinks", "sink_logit", "positions")}  # its own mode's
    body = {**body, **slip_context(mode, body["heads"], len(body["tokens"][0]) // body["heads"])}
    if (mode == "positions_from_text" and "positions" not in body) or (mode in ROPE_SLIPS and "rope" not in body):
        mode = "no_scaling"  # an odd d_head: RoPE cannot turn it
    response = client.post("/api/v1/attention/compare", json={**body, "failure_mode": mode})
    assert response.status_code == 200, (body, response.data[:300])
    assert finite_everywhere(orjson.loads(response.data))


def test_d_head_1_with_several_tokens_returns_every_head_slice(client):
    tokens = np.arange(12, dtype=float).reshape(3, 4).tolist()
    for extra in ({}, {"kv_heads": 2}, {"kv_heads": 1}):
        body = client.post("/api/v1/attention", json={"tokens": tokens, "heads": 4, **extra}).json
        assert [h["query"] for h in body["heads"]] == [[[row[h]] for row in tokens] for h in range(4)]
