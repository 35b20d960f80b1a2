"""Decoding under a sliding window with a rolling cache: the cache holds at most sinks + window
positions, each in its slot, and the decode equals the full pass under the same window, row for row."""

import numpy as np
import pytest

from service.compute import multi_head_attention
from service.compute.decode import decode_attention
from service.compute.divergence import max_difference
from service.compute.masks import Reach

from .plain_python import sees
from .test_long_context import random_case


def ring(position, window, sinks):
    """The rolling buffer written out: a list of sinks + window slots, each position written over
    the one in its slot (a sink in its own), read after `position` is in."""
    slots = [None] * (sinks + window)
    for p in range(position + 1):
        slots[p if p < sinks else sinks + (p - sinks) % window] = p
    return [p for p in slots if p is not None]


@pytest.mark.parametrize(
    "variant",
    [{}, {"kv_heads": 1}, {"rope": {"style": "half", "base": 10000.0}}],
    ids=["mha", "mqa", "rope"],
)
@pytest.mark.parametrize(("window", "sinks", "prefill"), [(3, 0, 1), (3, 2, 1), (2, 1, 6), (4, 0, 9), (1, 0, 1)])
def test_a_rolling_decode_equals_the_full_pass_under_the_same_window(variant, window, sinks, prefill):
    x, weights = random_case(3, n=11, kv_width=4 if variant.get("kv_heads") == 1 else 8)
    long = {"window": window, "sinks": sinks}
    decoded = decode_attention(x, 2, prefill=prefill, reach=long, **variant, **weights)
    full = multi_head_attention(x, 2, reach=long, **variant, **weights)
    assert max_difference(decoded.as_pass(), full) <= 1e-12
    for t in range(11):  # each query put weight exactly on what its window and the sinks show it
        assert decoded.seen[t].tolist() == [sees(t, j, window=window, sinks=sinks) for j in range(11)]


def test_the_cache_never_holds_more_than_sinks_and_window_and_keeps_them_in_their_slots():
    x, weights = random_case(5, n=12)
    decoded = decode_attention(x, 2, reach=Reach(window=3, sinks=4), **weights)
    for t in range(12):
        assert decoded.cache_positions(t).tolist() == ring(t, 3, 4)
        assert decoded.cache_elements(t) == min(t + 1, 7) * decoded.config.cache_elements_per_token
    # StreamingLLM's example: four sinks, a window of three, after token 8 the slots hold 0-3 and 6-8
    assert sorted(decoded.cache_positions(8).tolist()) == [0, 1, 2, 3, 6, 7, 8]
    assert decoded.cache_positions(8).tolist() == [0, 1, 2, 3, 7, 8, 6]  # 7 took 4's slot, 8 took 5's


def test_a_prompt_longer_than_the_window_is_prefilled_over_its_own_keys():
    x, weights = random_case(9, n=10)
    decoded = decode_attention(x, 2, prefill=8, reach=Reach(3), **weights)
    full = multi_head_attention(x, 2, reach=Reach(3), **weights)
    np.testing.assert_allclose(decoded.output, full.output, rtol=0, atol=1e-12)
    assert decoded.cache_positions(7).tolist() == [6, 7, 5]  # what the prefill leaves: its last three


def test_a_window_as_long_as_the_text_decodes_as_plain_causal_attention():
    x, weights = random_case(2, n=7)
    windowed = decode_attention(x, 2, reach=Reach(window=7, sinks=2), **weights)
    plain = decode_attention(x, 2, **weights)
    assert max_difference(windowed.as_pass(), plain.as_pass()) == 0.0


def test_a_sink_logit_decodes_as_the_full_pass_takes_it():
    x, weights = random_case(4, n=9)
    long = {"window": 4, "sinks": 1, "sink_logit": [0.5, -1.0]}
    decoded = decode_attention(x, 2, reach=long, **weights)
    full = multi_head_attention(x, 2, reach=long, **weights)
    assert max_difference(decoded.as_pass(), full) <= 1e-12
    assert (decoded.weights.sum(axis=-1) < 1).all()  # every row gave the sink its share
