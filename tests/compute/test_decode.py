"""Decoding with a KV cache gives the full causal pass's numbers, row for row; the broken decodes
compute what their code would (the pure-Python generation loop of tests/compute/plain_python.py)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.compute import AttentionInputError, multi_head_attention
from service.compute.decode import decode_attention
from service.compute.divergence import max_difference

from .plain_python import reference_decode

TOL = 1e-12
PARTS = ("query", "key", "value", "scores", "weights", "head_outputs", "concat", "output", "residual")


def close(a, b, tol=TOL):
    """Equal to `tol`, relative to the numbers' size where they are larger than 1."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return a.shape == b.shape and bool(np.all(np.abs(a - b) <= tol * np.maximum(1.0, np.abs(b))))


@st.composite
def problems(draw, latent=False):
    heads = draw(st.sampled_from([1, 2, 4]))
    d_head = draw(st.sampled_from([2, 4]))
    d_model, n = heads * d_head, draw(st.integers(1, 7))
    rng = np.random.default_rng(draw(st.integers(0, 10_000)))
    x = rng.normal(size=(n, d_model)) * draw(st.sampled_from([0.5, 2.0]))
    kwargs = {"rope": draw(st.sampled_from([None, "half", "interleaved"]))}
    if draw(st.booleans()):
        kwargs["w_q"] = rng.normal(size=(d_model, d_model)) / np.sqrt(d_model)
        kwargs["w_o"] = rng.normal(size=(d_model, d_model)) / np.sqrt(d_model)
    if latent:
        d_c, d_rope = draw(st.sampled_from([1, 3, 8])), draw(st.sampled_from([0, 2, 4]))
        kwargs["latent"] = mla_weights(rng, d_model, heads, d_c, d_rope)
        kwargs["rope"] = kwargs["rope"] if d_rope else None
    else:
        kv_heads = draw(st.sampled_from([k for k in (1, 2, 4) if heads % k == 0]))
        kwargs["kv_heads"] = kv_heads
        if "w_q" in kwargs:
            kwargs["w_k"] = rng.normal(size=(d_model, kv_heads * d_head)) / np.sqrt(d_model)
            kwargs["w_v"] = rng.normal(size=(d_model, kv_heads * d_head)) / np.sqrt(d_model)
    prefill = draw(st.integers(1, n))
    return x, heads, prefill, kwargs


def mla_weights(rng, d_model, heads, d_c, d_rope, absorbed=False):
    w = {
        "down": rng.normal(size=(d_model, d_c)) / np.sqrt(d_model),
        "up_key": rng.normal(size=(d_c, d_model)) / np.sqrt(d_c),
        "up_value": rng.normal(size=(d_c, d_model)) / np.sqrt(d_c),
        "absorbed": absorbed,
    }
    if d_rope:
        w["rope_key"] = rng.normal(size=(d_model, d_rope)) / np.sqrt(d_model)
        w["rope_query"] = rng.normal(size=(d_model, heads * d_rope)) / np.sqrt(d_model)
    return w


def assert_rows_equal_the_full_pass(trace, full):
    """Every step's own numbers against row t of the full causal pass."""
    n = full.config.n
    for t in range(n):
        reach = trace.reach[t]
        assert reach >= t + 1
        assert close(trace.query[:, t], full.query[:, t])
        assert close(trace.scores[:, t, : t + 1], full.scores[:, t, : t + 1])
        assert close(trace.weights[:, t, : t + 1], full.weights[:, t, : t + 1])
        assert np.all(trace.weights[:, t, t + 1 :] == 0.0)  # the future has no weight at any step
        for name in ("head_outputs",):
            assert close(getattr(trace, name)[:, t], getattr(full, name)[:, t]), name
        for name in ("concat", "output", "residual"):
            assert close(getattr(trace, name)[t], getattr(full, name)[t]), name
    if trace.key is not None and full.key is not None:
        assert close(trace.key, full.key) and close(trace.value, full.value)


@settings(max_examples=150, deadline=None)
@given(problems())
def test_each_decode_step_equals_its_row_of_the_full_causal_pass(problem):
    x, heads, prefill, kwargs = problem
    trace = decode_attention(x, heads, prefill=prefill, **kwargs)
    full = multi_head_attention(x, heads, **kwargs)
    assert_rows_equal_the_full_pass(trace, full)
    assert max_difference(trace.as_pass(), full) <= TOL * max(1.0, float(np.abs(full.residual).max()))


@settings(max_examples=100, deadline=None)
@given(problems(latent=True), st.booleans())
def test_latent_attention_decodes_to_its_full_pass_naive_or_absorbed(problem, absorbed):
    x, heads, prefill, kwargs = problem
    kwargs["latent"] = {**kwargs["latent"], "absorbed": absorbed}
    trace = decode_attention(x, heads, prefill=prefill, **kwargs)
    full = multi_head_attention(x, heads, **kwargs)
    assert_rows_equal_the_full_pass(trace, full)
    assert close(trace.cache["latent"], full.latent)  # the cache holds the latent, row by row


def test_the_cache_grows_a_row_per_position_and_holds_what_each_step_appended():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(5, 8))
    trace = decode_attention(x, 4, kv_heads=2, rope="half")
    full = multi_head_attention(x, 4, kv_heads=2, rope="half")
    keys, values = trace.cache["key"], trace.cache["value"]
    assert keys.shape == (2, 5, 2) and values.shape == (2, 5, 2)  # [kv_heads, n, d_head]
    assert close(keys[:, :, :], full.key[[0, 2]])  # query heads 0 and 1 read kv head 0; 2 and 3 kv head 1
    assert [trace.cache_elements(t) for t in range(5)] == [8 * (t + 1) for t in range(5)]  # 2 * 2 kv heads * 2


def test_a_chunked_prefill_masks_its_block_bottom_right():
    """Prefill 3 of 5: the block's queries see up to themselves; then one new query per step sees all."""
    x = np.random.default_rng(4).normal(size=(5, 4))
    trace = decode_attention(x, 2, prefill=3)
    assert trace.blocks == ((0, 3), (3, 4), (4, 5))
    assert trace.reach.tolist() == [3, 3, 3, 4, 5]
    expected = np.tril(np.ones((5, 5), dtype=bool))
    assert np.array_equal(trace.seen, expected)


@pytest.mark.parametrize("mode", ["decode_mask_top_left", "decode_position_reset", "cache_not_appended"])
@pytest.mark.parametrize("prefill", [1, 3])
@pytest.mark.parametrize("kv_heads", [1, 2, 4])
def test_each_broken_decode_equals_the_generation_loop_written_the_broken_way(mode, prefill, kv_heads):
    rng = np.random.default_rng(11)
    x = rng.normal(size=(6, 8))
    w = {
        "w_q": rng.normal(size=(8, 8)) / 3,
        "w_k": rng.normal(size=(8, kv_heads * 2)) / 3,
        "w_v": rng.normal(size=(8, kv_heads * 2)) / 3,
        "w_o": rng.normal(size=(8, 8)) / 3,
    }
    rope = {"style": "interleaved", "base": 100.0}
    trace = decode_attention(x, 4, prefill=prefill, kv_heads=kv_heads, rope=rope, failure_mode=mode, **w)
    ref = reference_decode(
        x.tolist(),
        4,
        **{k: v.tolist() for k, v in w.items()},
        kv_heads=kv_heads,
        rope=rope,
        failure_mode=mode,
        prefill=prefill,
    )
    laid_out = trace.as_pass()
    for name in PARTS:
        assert close(getattr(laid_out, name), ref[name]), name
    assert np.array_equal(trace.seen, np.array(ref["seen"]))


@pytest.mark.parametrize("mode", ["decode_mask_top_left", "decode_position_reset", "cache_not_appended"])
@pytest.mark.parametrize("absorbed", [False, True])
def test_each_broken_decode_of_latent_attention_equals_the_generation_loop_naive_or_absorbed(mode, absorbed):
    """The absorbed form attending before appending once answered 500 (position 1 had no cache to read)."""
    rng = np.random.default_rng(13)
    x = rng.normal(size=(5, 8))
    latent = {
        "down": rng.normal(size=(8, 3)) / 2,
        "up_key": rng.normal(size=(3, 8)) / 2,
        "up_value": rng.normal(size=(3, 8)) / 2,
        "rope_key": rng.normal(size=(8, 2)) / 2,
        "rope_query": rng.normal(size=(8, 4)) / 2,
    }
    trace = decode_attention(x, 2, latent={**latent, "absorbed": absorbed}, failure_mode=mode)
    ref = reference_decode(
        x.tolist(),
        2,
        latent={k: v.tolist() for k, v in latent.items()},
        rope={"style": "half", "base": 10000.0},
        failure_mode=mode,
    )
    laid_out = trace.as_pass()
    for name in ("weights", "head_outputs", "concat", "output", "residual"):
        assert close(getattr(laid_out, name), ref[name]), name
    assert np.array_equal(trace.seen, np.array(ref["seen"]))


def test_a_decode_done_right_equals_the_generation_loop_too():
    rng = np.random.default_rng(12)
    x = rng.normal(size=(5, 8))
    rope = {"style": "half", "base": 10000.0}
    trace = decode_attention(x, 4, kv_heads=2, rope=rope)
    ref = reference_decode(x.tolist(), 4, kv_heads=2, rope=rope)
    for name in PARTS:
        assert close(getattr(trace.as_pass(), name), ref[name]), name


def test_top_left_alignment_lets_one_decoded_token_see_only_position_one():
    x = np.random.default_rng(5).normal(size=(4, 4))
    trace = decode_attention(x, 2, failure_mode="decode_mask_top_left")
    for t in range(1, 4):
        assert np.all(trace.weights[:, t, 0] == 1.0) and np.all(trace.weights[:, t, 1:] == 0.0)


def test_attending_before_appending_never_sees_itself_and_the_first_token_sees_nothing():
    x = np.random.default_rng(6).normal(size=(4, 4))
    trace = decode_attention(x, 2, failure_mode="cache_not_appended")
    assert np.all(trace.weights[:, 0] == 0.0) and np.all(trace.head_outputs[:, 0] == 0.0)
    assert not trace.seen.diagonal().any()
    np.testing.assert_allclose(trace.weights[:, 1:].sum(axis=-1), 1.0)


def test_position_reset_turns_every_decoded_query_as_position_one():
    x = np.random.default_rng(7).normal(size=(4, 4))
    broken = decode_attention(x, 2, rope="half", failure_mode="decode_position_reset")
    unrotated = multi_head_attention(x, 2)  # position 0's rotation is the identity
    np.testing.assert_allclose(broken.query[:, 1:], unrotated.query[:, 1:], rtol=0, atol=1e-15)


def test_decoding_refuses_a_mask_off_and_a_prefill_out_of_range():
    x = np.ones((3, 4))
    with pytest.raises(AttentionInputError) as off:
        decode_attention(x, 2, causal=False)
    assert off.value.field == "causal"
    for prefill in (0, 4, True, 1.5):
        with pytest.raises(AttentionInputError) as bad:
            decode_attention(x, 2, prefill=prefill)
        assert bad.value.field == "prefill"


def test_a_decoding_failure_mode_without_the_causal_mask_is_refused_by_name():
    with pytest.raises(AttentionInputError) as info:
        multi_head_attention(np.ones((3, 4)), 2, causal=False, failure_mode="cache_not_appended")
    assert info.value.field == "failure_mode"
