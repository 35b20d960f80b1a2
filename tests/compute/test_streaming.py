"""Long contexts' slips and StreamingLLM's renumbering, against the plain-Python generation loop
(plain_python.reference_streaming: a list cache that evicts its oldest non-sink entry, written for
the tests): each slip computes exactly what its broken code would, the renumbered decode equals the
full pass until the cache first evicts and the loop after."""

import numpy as np
import pytest

from service.compute import multi_head_attention
from service.compute.decode import decode_attention, one_pass
from service.compute.errors import AttentionInputError
from service.compute.failure_modes import REGISTRY
from service.compute.masks import Reach

from .plain_python import LONG_CONTEXT_SLIPS, as_engine, reference_streaming
from .test_long_context import random_case

ROPE = {"style": "half", "base": 10000.0}
VARIANTS = {
    "mha": {},
    "mqa": {"kv_heads": 1},
    "gqa-rope": {"kv_heads": 2, "rope": ROPE},
    "rope-interleaved": {"rope": {"style": "interleaved", "base": 500.0}},
}


def case(variant, n=11, seed=3):
    heads = 4 if variant.get("kv_heads") == 2 else 2
    x, weights = random_case(seed, n=n, kv_width=(variant.get("kv_heads") or heads) * (8 // heads))
    return x, heads, weights


def streamed(x, heads, weights, **options):
    return reference_streaming(x.tolist(), heads, **options, **{k: v.tolist() for k, v in weights.items()})


def assert_rows(trace, ref, rows=None):
    rows = slice(None) if rows is None else rows
    np.testing.assert_allclose(trace.weights[:, rows], np.array(ref["weights"])[:, rows], rtol=0, atol=1e-12)
    np.testing.assert_allclose(trace.output[rows], np.array(ref["output"])[rows], rtol=0, atol=1e-11)


@pytest.mark.parametrize("variant", VARIANTS.values(), ids=VARIANTS.keys())
@pytest.mark.parametrize("mode", LONG_CONTEXT_SLIPS)
def test_each_long_context_slip_computes_what_its_broken_code_would(mode, variant):
    x, heads, weights = case(variant)
    options = {"window": 3, "sinks": 2, "sink_logit": [0.5 - h for h in range(heads)], **variant}
    if mode == "positions_from_text":
        if "rope" not in variant:
            pytest.skip("the renumbering slip needs RoPE (the engine refuses it without: see below)")
        options["positions"] = "cache"
    trace = one_pass(x, heads, failure_mode=mode, **as_engine(options), **weights)  # a decoding slip: prefill 1
    prefill = 1 if REGISTRY[mode].decoding else len(x)
    ref = streamed(x, heads, weights, failure_mode=mode, prefill=prefill, **options)
    assert_rows(trace, ref)
    if mode != "cache_not_truncated":  # the only slip whose numbers are right
        right = one_pass(x, heads, **as_engine(options), **weights)
        assert not np.allclose(trace.output, right.output), mode


@pytest.mark.parametrize("prefill", [1, 4, 9])
@pytest.mark.parametrize("mode", [m for m in LONG_CONTEXT_SLIPS if m != "positions_from_text"])
def test_a_slipping_decode_with_a_prompt_longer_than_the_window_equals_the_loop(mode, prefill):
    x, heads, weights = case(VARIANTS["gqa-rope"], n=12, seed=8)
    options = {"window": 3, "sinks": 1, "sink_logit": [0.3, -0.2, 1.0, 0.0], **VARIANTS["gqa-rope"]}
    decoded = decode_attention(x, heads, prefill=prefill, failure_mode=mode, **as_engine(options), **weights)
    ref = streamed(x, heads, weights, failure_mode=mode, prefill=prefill, **options)
    assert_rows(decoded, ref)
    assert [sorted(decoded.cache_positions(t).tolist()) for t in range(12)] == ref["held"]


def test_a_cache_not_truncated_holds_every_position_for_the_same_numbers():
    x, heads, weights = case({}, n=10)
    right = decode_attention(x, heads, reach=Reach(window=3, sinks=1), **weights)
    kept = decode_attention(x, heads, reach=Reach(window=3, sinks=1), failure_mode="cache_not_truncated", **weights)
    np.testing.assert_allclose(kept.output, right.output, rtol=0, atol=1e-12)
    assert len(right.cache_positions(9)) == 4 and len(kept.cache_positions(9)) == 10  # sinks + W against n
    assert kept.cache_elements(9) == 10 * right.config.cache_elements_per_token


def test_streaming_llm_renumbers_a_cache_of_0_3_and_6_8_as_positions_0_to_7():
    """Four sinks and a window of four keys (the query with three before it): when token 9 arrives the
    cache held 0-3 and 6-8; token 9 is decoded at place 7, its keys at places 0 to 7 (Xiao et al. 2023,
    section 3.2)."""
    x, heads, weights = case({"rope": ROPE}, n=12)
    decoded = decode_attention(x, heads, reach=Reach(4, 4, positions="cache"), rope=ROPE, **weights)
    assert sorted(decoded.cache_positions(8).tolist()) == [0, 1, 2, 3, 5, 6, 7, 8]
    assert sorted(decoded.cache_positions(9).tolist()) == [0, 1, 2, 3, 6, 7, 8, 9]
    turned = decoded.rope_positions(9)
    held = decoded.cache_positions(9).tolist()
    assert turned["query"] == 7 and {p: k for p, k in zip(held, turned["keys"].tolist(), strict=True)} == {
        0: 0,
        1: 1,
        2: 2,
        3: 3,
        6: 4,
        7: 5,
        8: 6,
        9: 7,
    }
    ref = streamed(x, heads, weights, window=4, sinks=4, positions="cache", rope=ROPE)
    assert_rows(decoded, ref)


def test_the_positions_from_text_slip_says_its_keys_were_turned_at_the_texts_positions():
    """The same cache as above; the slip keeps each key at the text's position (6 to 9, not 4 to 7)
    while the query is still placed in the cache, which is what its trace must say."""
    x, heads, weights = case({"rope": ROPE}, n=12)
    slipped = decode_attention(
        x, heads, reach=Reach(4, 4, positions="cache"), rope=ROPE, failure_mode="positions_from_text", **weights
    )
    turned, held = slipped.rope_positions(9), slipped.cache_positions(9).tolist()
    assert turned["query"] == 7 and turned["keys"].tolist() == held


@pytest.mark.parametrize("prefill", [1, 6])
def test_renumbering_equals_the_full_pass_until_the_cache_first_evicts(prefill):
    x, heads, weights = case({"rope": ROPE}, n=12, seed=11)
    options = {"window": 3, "sinks": 2, "rope": ROPE}
    decoded = decode_attention(x, heads, prefill=prefill, **as_engine({**options, "positions": "cache"}), **weights)
    full = multi_head_attention(x, heads, **as_engine(options), **weights)
    first_eviction = max(prefill, 2 + 3)  # position 5 is the first written over a kept one
    np.testing.assert_allclose(decoded.output[:first_eviction], full.output[:first_eviction], rtol=0, atol=1e-12)
    assert not np.allclose(decoded.output[first_eviction], full.output[first_eviction])
    assert_rows(decoded, streamed(x, heads, weights, prefill=prefill, positions="cache", **options))


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"failure_mode": "window_off_by_one"}, "without window"),
        ({"failure_mode": "sinks_evicted", "window": 3}, "without sinks above 0"),
        ({"failure_mode": "sink_logit_ignored", "window": 3}, "without sink_logit"),
        ({"failure_mode": "positions_from_text", "window": 3, "rope": ROPE}, "without positions 'cache'"),
        ({"positions": "cache", "window": 3}, "needs a window and rope"),
        ({"positions": "cache", "rope": ROPE}, "needs a window and rope"),
        ({"positions": "later", "window": 3, "rope": ROPE}, "'original' or 'cache'"),
        ({"failure_mode": "cache_not_appended", "window": 3}, "leave them out"),
    ],
)
def test_what_a_slip_or_the_renumbering_needs_is_asked_for_by_name(options, words):
    x, heads, weights = case({}, n=6)
    with pytest.raises(AttentionInputError, match=words) as caught:
        one_pass(x, heads, **as_engine(options), **weights)
    assert caught.value.field in ("failure_mode", "positions")


def test_renumbering_latent_attention_is_refused_with_its_reason():
    rng = np.random.default_rng(2)
    latent = {
        "down": rng.normal(size=(8, 3)).tolist(),
        "up_key": rng.normal(size=(3, 8)).tolist(),
        "up_value": rng.normal(size=(3, 8)).tolist(),
        "rope_key": rng.normal(size=(8, 2)).tolist(),
        "rope_query": rng.normal(size=(8, 4)).tolist(),
    }
    with pytest.raises(AttentionInputError, match="latent attention") as caught:
        decode_attention(rng.normal(size=(6, 8)), 2, latent=latent, reach=Reach(2, positions="cache"), rope=ROPE)
    assert caught.value.field == "positions"
