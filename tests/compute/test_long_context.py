"""Long contexts in the pass: a sliding window, attention sinks and a learned sink logit, against the
plain-Python reference (plain_python.py: `sees` and `softmax_visible`, written for the tests)."""

import math

import numpy as np
import pytest

from service.compute import multi_head_attention
from service.compute.decode import decode_attention
from service.compute.errors import AttentionInputError
from service.compute.failure_modes import REGISTRY
from service.compute.masks import Reach

from .plain_python import LONG_NEEDS, as_engine, reference_mha, slip_context

PARTS = ("scores", "weights", "head_outputs", "concat", "output", "residual")


def random_case(seed, n=9, d_model=8, kv_width=8):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d_model))
    weights = {
        "w_q": rng.normal(size=(d_model, d_model)),
        "w_k": rng.normal(size=(d_model, kv_width)),
        "w_v": rng.normal(size=(d_model, kv_width)),
        "w_o": rng.normal(size=(d_model, d_model)),
    }
    return x, weights


def assert_reference(trace, ref):
    for name in PARTS:
        np.testing.assert_allclose(getattr(trace, name), np.array(ref[name]), rtol=0, atol=1e-12, err_msg=name)


@pytest.mark.parametrize(
    "variant",
    [
        {},  # multi-head
        {"kv_heads": 1},  # multi-query
        {"rope": {"style": "half", "base": 10000.0}},
        {"rope": {"style": "interleaved", "base": 500.0}},
    ],
    ids=["mha", "mqa", "rope-half", "rope-interleaved"],
)
@pytest.mark.parametrize(
    ("window", "sinks", "sink_logit"),
    [(1, 0, None), (3, 0, None), (3, 2, None), (4, 1, [0.7, -2.0]), (None, 0, [3.0, -1.5]), (20, 0, None)],
)
def test_a_window_sinks_and_a_sink_logit_equal_the_plain_reference(variant, window, sinks, sink_logit):
    kv_width = 4 if variant.get("kv_heads") == 1 else 8
    x, weights = random_case(7, kv_width=kv_width)
    reach = Reach(window, sinks, sink_logit)
    trace = multi_head_attention(x, 2, reach=reach, **variant, **weights)
    ref = reference_mha(
        x.tolist(),
        2,
        **variant,
        **{k: v.tolist() for k, v in weights.items()},
        window=window,
        sinks=sinks,
        sink_logit=sink_logit,
    )
    assert_reference(trace, ref)


def test_grouped_query_heads_under_a_window_equal_the_reference():
    x, weights = random_case(11, n=12, d_model=16, kv_width=8)  # 4 query heads, 2 key/value heads
    trace = multi_head_attention(x, 4, kv_heads=2, reach=Reach(5, 1, (0.0, 1.0, -1.0, 2.0)), **weights)
    ref = reference_mha(
        x.tolist(),
        4,
        kv_heads=2,
        **{k: v.tolist() for k, v in weights.items()},
        window=5,
        sinks=1,
        sink_logit=[0.0, 1.0, -1.0, 2.0],
    )
    assert_reference(trace, ref)


def test_the_fast_kernels_and_the_spec_loop_agree_past_one_block_of_rows():
    x, weights = random_case(5, n=150)  # more rows than one block (fused.ROW_BLOCK)
    reach = Reach(window=16, sinks=4, sink_logit=(1.0, -1.0))
    fast = multi_head_attention(x, 2, reach=reach, **weights)
    spec = multi_head_attention(x, 2, reach=reach, reference=True, **weights)
    for name in PARTS:
        np.testing.assert_allclose(getattr(fast, name), getattr(spec, name), rtol=0, atol=1e-12, err_msg=name)
    assert (fast.weights[:, 100, 5:85] == 0).all()  # row 100 sees 85..100 and the sinks 0..3
    assert (fast.weights[:, 100, 85:101] > 0).all() and (fast.weights[:, 100, :4] > 0).all()


@pytest.mark.parametrize("window", [9, 10, 1000])
def test_a_window_as_long_as_the_text_is_plain_causal_attention_exactly(window):
    x, weights = random_case(3)
    windowed = multi_head_attention(x, 2, reach=Reach(window), **weights)
    plain = multi_head_attention(x, 2, **weights)
    for name in PARTS:
        assert np.array_equal(getattr(windowed, name), getattr(plain, name)), name


def test_each_query_sees_exactly_its_window_and_the_sinks():
    x, _ = random_case(4, n=10)
    trace = multi_head_attention(x, 2, reach=Reach(window=3, sinks=2))
    seen = trace.weights[0] > 0
    for i in range(10):
        expected = {j for j in range(10) if j <= i and (i - j < 3 or j < 2)}
        assert set(np.flatnonzero(seen[i])) == expected, i
    assert seen[9].sum() == 3 + 2  # W keys with itself, and S sinks


def test_tokens_outside_the_last_querys_window_and_sinks_do_not_change_its_output():
    x, weights = random_case(8, n=12)
    reach = Reach(window=4, sinks=2, sink_logit=(0.3, 0.9))
    before = multi_head_attention(x, 2, reach=reach, **weights)
    changed = x.copy()
    changed[2:8] = np.random.default_rng(99).normal(size=(6, 8)) * 50  # every position it does not see
    after = multi_head_attention(changed, 2, reach=reach, **weights)
    assert np.array_equal(before.output[-1], after.output[-1])
    assert not np.array_equal(before.output[7], after.output[7])  # a row that sees them does change


def test_a_sink_logit_takes_the_same_share_in_its_three_written_forms():
    x, _ = random_case(12)
    z = np.array([0.8, -3.0])
    trace = multi_head_attention(x, 2, reach={"sink_logit": z})
    plain = multi_head_attention(x, 2).weights  # [H, n, n]
    s = np.where(trace.mask, -np.inf, trace.scores)  # [H, n, n]
    lse = np.log(np.exp(s - s.max(-1, keepdims=True)).sum(-1, keepdims=True)) + s.max(-1, keepdims=True)
    column = np.concatenate([s, np.broadcast_to(z[:, None, None], (2, 9, 1))], axis=-1)
    extra = np.exp(column - column.max(-1, keepdims=True))
    dropped = (extra / extra.sum(-1, keepdims=True))[..., :-1]  # an extra column, dropped after the softmax
    rescaled = plain * np.exp(lse - np.logaddexp(lse, z[:, None, None]))
    sigmoid = plain / (1.0 + np.exp(z[:, None, None] - lse))
    for form in (dropped, rescaled, sigmoid):
        np.testing.assert_allclose(trace.weights, form, rtol=0, atol=1e-15)
    sums = trace.weights.sum(-1)
    assert (sums < 1).all() and (sums > 0).all()
    np.testing.assert_allclose(sums, 1 / (1 + np.exp(z[:, None] - lse[..., 0])), rtol=0, atol=1e-15)


def test_a_huge_sink_logit_takes_everything_without_nan():
    x, _ = random_case(2)
    trace = multi_head_attention(x, 2, reach=Reach(sink_logit=(800.0, -800.0)))
    assert np.isfinite(trace.weights).all()
    assert np.abs(trace.weights[0]).max() < 1e-300
    np.testing.assert_allclose(trace.weights[1].sum(-1), 1.0, rtol=0, atol=1e-15)


@pytest.mark.parametrize(
    ("arguments", "field", "words"),
    [
        ({"window": 0}, "window", "positive integer"),
        ({"window": 2, "causal": False}, "window", "set causal to true"),
        ({"sinks": 2}, "sinks", "give a window"),
        ({"sinks": -1, "window": 2}, "sinks", "whole number"),
        ({"sink_logit": [1.0]}, "sink_logit", "one number per head: 2"),
        ({"sink_logit": [1.0, math.inf]}, "sink_logit", "finite"),
        ({"sink_logit": ["a", "b"]}, "sink_logit", "numbers, one per head"),
        ({"window": 2, "failure_mode": "decode_mask_top_left"}, "failure_mode", "window"),
    ],
)
def test_what_a_window_cannot_be_is_refused_by_name(arguments, field, words):
    x, _ = random_case(1)
    with pytest.raises(AttentionInputError) as refused:
        multi_head_attention(x, 2, **as_engine(arguments))
    assert refused.value.field == field
    assert words in str(refused.value)


@pytest.mark.parametrize("absorbed", [False, True])
def test_latent_attention_under_a_window_sinks_and_a_sink_logit_equals_the_reference(absorbed):
    """DeepSeek-V2's latent with its decoupled RoPE key, windowed: the pass and a rolling decode."""
    rng = np.random.default_rng(31)
    x = rng.normal(size=(9, 8))
    latent = {
        "down": rng.normal(size=(8, 3)),
        "up_key": rng.normal(size=(3, 8)),
        "up_value": rng.normal(size=(3, 8)),
        "rope_key": rng.normal(size=(8, 2)),
        "rope_query": rng.normal(size=(8, 4)),
    }
    w_q = rng.normal(size=(8, 8))
    long = {"window": 3, "sinks": 1, "sink_logit": [0.4, -0.6]}
    rope = {"style": "half", "base": 10000.0}
    as_lists = {k: v.tolist() for k, v in latent.items()}
    ref = reference_mha(x.tolist(), 2, w_q=w_q.tolist(), latent=as_lists, rope=rope, **long)
    trace = multi_head_attention(x, 2, w_q=w_q, latent={**latent, "absorbed": absorbed}, rope=rope, reach=long)
    for name in ("weights", "head_outputs", "output"):
        np.testing.assert_allclose(getattr(trace, name), np.array(ref[name]), rtol=0, atol=1e-12, err_msg=name)
    decoded = decode_attention(x, 2, w_q=w_q, latent={**latent, "absorbed": absorbed}, rope=rope, reach=long)
    np.testing.assert_allclose(decoded.output, np.array(ref["output"]), rtol=0, atol=1e-12)
    assert len(decoded.cache_positions(8)) == 4  # a sink and three in the window: the latent rolls too


PASS_MODES = sorted(m for m, f in REGISTRY.items() if f.engine and not f.decoding and not LONG_NEEDS & set(f.needs))


@pytest.mark.parametrize("mode", PASS_MODES)
def test_every_failure_mode_of_a_pass_under_a_window_and_sinks_equals_the_reference(mode):
    """A broken pass stays broken the same way under a window: the reference loop applies the mode
    and the window independently of the engine."""
    heads, kv_heads = (4, 2) if mode == "gqa_tiled" else (2, None)
    x, weights = random_case(13, n=10, kv_width=8 if kv_heads is None else 4)
    options = {"window": 3, "sinks": 1, "kv_heads": kv_heads, "failure_mode": mode, **slip_context(mode, heads)}
    trace = multi_head_attention(x, heads, **as_engine(options), **weights)
    ref = reference_mha(x.tolist(), heads, **options, **{k: v.tolist() for k, v in weights.items()})
    assert_reference(trace, ref)
