"""Parity with PyTorch in float64: SDPA (with enable_gqa) and nn.MultiheadAttention, to 1e-9."""

import numpy as np
import pytest

from service.compute import multi_head_attention

torch = pytest.importorskip("torch", reason="PyTorch is not installed (.ci/run installs torch==2.13.0)")
F = torch.nn.functional

TOL = 1e-9


def _weights(rng, d_model, kv_width):
    return {
        "w_q": rng.normal(size=(d_model, d_model)) / np.sqrt(d_model),
        "w_k": rng.normal(size=(d_model, kv_width)) / np.sqrt(d_model),
        "w_v": rng.normal(size=(d_model, kv_width)) / np.sqrt(d_model),
        "w_o": rng.normal(size=(d_model, d_model)) / np.sqrt(d_model),
    }


@pytest.mark.parametrize(
    "n, d_model, heads, kv_heads, causal",
    [
        (3, 4, 2, 2, True),
        (16, 32, 4, 4, False),
        (33, 64, 8, 2, True),
        (20, 48, 6, 1, True),
        (8, 24, 6, 3, False),
        (300, 64, 4, 4, True),  # row blocks with a ragged last one, heads spread over the cores
        (260, 32, 4, 2, False),
    ],
)
@pytest.mark.parametrize("magnitude", [1.0, 40.0])  # 40: scores past exp's safe range, the row max is subtracted
def test_matches_scaled_dot_product_attention(n, d_model, heads, kv_heads, causal, magnitude):
    rng = np.random.default_rng(n)
    d_head = d_model // heads
    x = rng.normal(size=(n, d_model)) * magnitude
    w = _weights(rng, d_model, kv_heads * d_head)
    trace = multi_head_attention(x, heads, causal=causal, kv_heads=kv_heads, **w)

    t = {k: torch.from_numpy(v) for k, v in w.items()}
    tx = torch.from_numpy(x)
    q = (tx @ t["w_q"]).view(n, heads, d_head).transpose(0, 1)  # [H, n, d]
    k = (tx @ t["w_k"]).view(n, kv_heads, d_head).transpose(0, 1)  # [kv, n, d]
    v = (tx @ t["w_v"]).view(n, kv_heads, d_head).transpose(0, 1)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=kv_heads != heads)
    concat = out.transpose(0, 1).reshape(n, d_model)
    output = concat @ t["w_o"]

    np.testing.assert_allclose(trace.head_outputs, out.numpy(), rtol=0, atol=TOL)
    np.testing.assert_allclose(trace.concat, concat.numpy(), rtol=0, atol=TOL)
    np.testing.assert_allclose(trace.output, output.numpy(), rtol=0, atol=TOL)
    np.testing.assert_allclose(trace.residual, (tx + output).numpy(), rtol=0, atol=TOL)


@pytest.mark.parametrize("n, d_model, heads, causal", [(3, 4, 2, True), (12, 32, 4, True), (9, 24, 3, False)])
def test_matches_nn_multihead_attention_with_the_same_weights(n, d_model, heads, causal):
    rng = np.random.default_rng(d_model)
    x = rng.normal(size=(n, d_model))
    w = _weights(rng, d_model, d_model)
    trace = multi_head_attention(x, heads, causal=causal, **w)

    mha = torch.nn.MultiheadAttention(d_model, heads, bias=False, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        # PyTorch stores [out][in] and computes x @ W^T; ours is [in][out] and x @ W.
        mha.in_proj_weight.copy_(torch.from_numpy(np.concatenate([w["w_q"].T, w["w_k"].T, w["w_v"].T])))
        mha.out_proj.weight.copy_(torch.from_numpy(w["w_o"].T))
    tx = torch.from_numpy(x)[None]
    mask = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1) if causal else None  # True = masked
    with torch.no_grad():
        out, weights = mha(tx, tx, tx, attn_mask=mask, need_weights=True, average_attn_weights=False)
    np.testing.assert_allclose(trace.weights, weights[0].numpy(), rtol=0, atol=TOL)
    np.testing.assert_allclose(trace.output, out[0].numpy(), rtol=0, atol=TOL)


@pytest.mark.parametrize("n, d_model, heads, causal", [(3, 4, 2, True), (10, 24, 3, False)])
@pytest.mark.parametrize("reference", [False, True])
def test_projection_biases_match_nn_multihead_attention_with_bias(n, d_model, heads, causal, reference):
    """BERT's attention: every projection has a bias (Q = X @ W_Q + b_Q, and so on)."""
    rng = np.random.default_rng(n + d_model)
    x = rng.normal(size=(n, d_model))
    w = _weights(rng, d_model, d_model)
    b = {name: rng.normal(size=d_model) for name in ("b_q", "b_k", "b_v", "b_o")}
    trace = multi_head_attention(x, heads, causal=causal, reference=reference, **w, **b)

    mha = torch.nn.MultiheadAttention(d_model, heads, bias=True, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.from_numpy(np.concatenate([w["w_q"].T, w["w_k"].T, w["w_v"].T])))
        mha.in_proj_bias.copy_(torch.from_numpy(np.concatenate([b["b_q"], b["b_k"], b["b_v"]])))
        mha.out_proj.weight.copy_(torch.from_numpy(w["w_o"].T))
        mha.out_proj.bias.copy_(torch.from_numpy(b["b_o"]))
    tx = torch.from_numpy(x)[None]
    mask = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1) if causal else None
    with torch.no_grad():
        out, weights = mha(tx, tx, tx, attn_mask=mask, need_weights=True, average_attn_weights=False)
    np.testing.assert_allclose(trace.weights, weights[0].numpy(), rtol=0, atol=TOL)
    np.testing.assert_allclose(trace.output, out[0].numpy(), rtol=0, atol=TOL)


def test_fully_masked_rows_give_zeros_like_sdpa():
    from service.compute import steps

    scores = np.random.default_rng(0).normal(size=(2, 4, 4))
    mask = np.zeros((4, 4), dtype=bool)
    mask[1] = True  # query 1 may see nothing
    ours = steps.softmax(scores, mask)
    q = torch.from_numpy(np.random.default_rng(1).normal(size=(2, 4, 3)))
    sdpa = F.scaled_dot_product_attention(q, q, q, attn_mask=torch.from_numpy(~mask))  # True = attend
    assert np.all(ours[:, 1] == 0.0) and not np.isnan(ours).any()
    assert torch.all(sdpa[:, 1] == 0)


def test_scale_conventions_match_sdpa_scale_argument():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(6, 8))
    q = torch.from_numpy(x).view(6, 2, 4).transpose(0, 1)
    for mode, scale in (("no_scaling", 1.0), ("scale_by_d_model", 1 / np.sqrt(8))):
        trace = multi_head_attention(x, 2, failure_mode=mode)
        out = F.scaled_dot_product_attention(q, q, q, is_causal=True, scale=scale)
        np.testing.assert_allclose(trace.head_outputs, out.numpy(), rtol=0, atol=TOL)


def _kv_problem(seed, n, d_model, heads, kv_heads):
    rng = np.random.default_rng(seed)
    d_head = d_model // heads
    return rng.normal(size=(n, d_model)), _weights(rng, d_model, kv_heads * d_head), d_head


@pytest.mark.parametrize("n, d_model, heads, kv_heads, prefill", [(6, 16, 4, 2, 1), (7, 24, 6, 3, 3), (5, 8, 2, 1, 5)])
def test_decode_steps_match_sdpa_over_a_growing_cache(n, d_model, heads, kv_heads, prefill):
    """Generation as PyTorch code writes it: the prefill block causal, then each new query over the
    whole cache with no mask (a single query may see everything cached)."""
    from service.compute.decode import decode_attention

    x, w, d_head = _kv_problem(n, n, d_model, heads, kv_heads)
    trace = decode_attention(x, heads, kv_heads=kv_heads, prefill=prefill, **w)
    t = {k: torch.from_numpy(v) for k, v in w.items()}
    tx = torch.from_numpy(x)
    q = (tx @ t["w_q"]).view(n, heads, d_head).transpose(0, 1)  # [H, n, d]
    k = (tx @ t["w_k"]).view(n, kv_heads, d_head).transpose(0, 1)  # [kv, n, d]
    v = (tx @ t["w_v"]).view(n, kv_heads, d_head).transpose(0, 1)
    gqa = kv_heads != heads
    first = F.scaled_dot_product_attention(
        q[:, :prefill], k[:, :prefill], v[:, :prefill], is_causal=True, enable_gqa=gqa
    )
    outs = [first]
    for step in range(prefill, n):
        cache_k, cache_v = k[:, : step + 1], v[:, : step + 1]  # the cache after appending this token
        outs.append(F.scaled_dot_product_attention(q[:, step : step + 1], cache_k, cache_v, enable_gqa=gqa))
    out = torch.cat(outs, dim=1)
    np.testing.assert_allclose(trace.head_outputs, out.numpy(), rtol=0, atol=TOL)
    np.testing.assert_allclose(trace.key[:: heads // kv_heads] if gqa else trace.key, k.numpy(), rtol=0, atol=TOL)


def test_sdpa_is_causal_on_one_query_is_the_top_left_bug():
    """PyTorch aligns `is_causal` top-left: one query over a cache sees only key 0, which is exactly
    what the engine computes for failure mode decode_mask_top_left."""
    from service.compute.decode import decode_attention

    x, w, d_head = _kv_problem(3, 5, 8, 2, 2)
    broken = decode_attention(x, 2, failure_mode="decode_mask_top_left", **w)
    t = {k: torch.from_numpy(v) for k, v in w.items()}
    tx = torch.from_numpy(x)
    q = (tx @ t["w_q"]).view(5, 2, d_head).transpose(0, 1)
    k = (tx @ t["w_k"]).view(5, 2, d_head).transpose(0, 1)
    v = (tx @ t["w_v"]).view(5, 2, d_head).transpose(0, 1)
    for step in range(1, 5):
        out = F.scaled_dot_product_attention(q[:, step : step + 1], k[:, : step + 1], v[:, : step + 1], is_causal=True)
        np.testing.assert_allclose(broken.head_outputs[:, step], out[:, 0].numpy(), rtol=0, atol=TOL)


def test_gqa_tiled_is_what_repeat_gives_and_the_engine_is_what_repeat_interleave_gives():
    x, w, d_head = _kv_problem(4, 6, 16, 4, 2)
    t = {k: torch.from_numpy(v) for k, v in w.items()}
    tx = torch.from_numpy(x)
    q = (tx @ t["w_q"]).view(6, 4, d_head).transpose(0, 1)  # [H, n, d]
    k = (tx @ t["w_k"]).view(6, 2, d_head).transpose(0, 1)  # [kv, n, d]
    v = (tx @ t["w_v"]).view(6, 2, d_head).transpose(0, 1)
    tiled = F.scaled_dot_product_attention(q, k.repeat(2, 1, 1), v.repeat(2, 1, 1), is_causal=True)
    interleaved = F.scaled_dot_product_attention(
        q, k.repeat_interleave(2, dim=0), v.repeat_interleave(2, dim=0), is_causal=True
    )
    broken = multi_head_attention(x, 4, kv_heads=2, failure_mode="gqa_tiled", **w)
    correct = multi_head_attention(x, 4, kv_heads=2, **w)
    np.testing.assert_allclose(broken.head_outputs, tiled.numpy(), rtol=0, atol=TOL)
    np.testing.assert_allclose(correct.head_outputs, interleaved.numpy(), rtol=0, atol=TOL)
