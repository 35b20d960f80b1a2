"""Inside the trained model (service/models/inside.py) against a forward written again for the test from the
model's safetensors (plain numpy here, torch's autograd for the gradients where torch is installed): the
lens's last layer is the logits, patches equal the reference's, nothing outside a patch's cone moves, the
gradients equal autograd and finite differences, the one-head case of attribution patching is the hand
computation, and each pitfall parts where it should."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import numpy as np
import pytest

from service.models.byte_model import load_models
from service.models.inside import Metric, attention_backward, backward, flag, lens, patching, run

MODELS = Path(__file__).resolve().parents[2] / "content" / "models"
CLEAN, CORRUPTED = b"q8Lm3Zq8Lm3Z", b"q8Lm3Zq8Lm3Y"
METRIC = Metric("logit_difference", ord("Z"), ord("Y"))


@pytest.fixture(scope="module")
def model():
    return load_models(MODELS)["bytes-2l-attn"]


def weights() -> dict[str, np.ndarray]:
    """The safetensors read again, by hand: 8-byte header length, JSON header, float32 data."""
    data = (MODELS / "bytes-2l-attn" / "model.safetensors").read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    header.pop("__metadata__", None)
    out = {}
    for name, entry in header.items():
        start, end = entry["data_offsets"]
        raw = np.frombuffer(data[8 + length + start : 8 + length + end], dtype="<f4")
        out[name] = raw.reshape(entry["shape"]).astype(np.float64)
    return out


def norm(x):
    mu = x.mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(axis=-1, keepdims=True) + 1e-5)


def turn(x, positions):
    """RoPE, half pairing, base 10,000: feature i with i + d/2, as a complex rotation."""
    d = x.shape[-1]
    z = x[..., : d // 2] + 1j * x[..., d // 2 :]
    angle = np.exp(1j * np.outer(positions, 10000.0 ** (-np.arange(0, d, 2) / d)))
    z = z * angle
    return np.concatenate([z.real, z.imag], axis=-1)


def reference(tokens: bytes, stream_patch=None, head_patch=None):
    """The model written again: every stream and head output; `stream_patch` (layer, position, row) and
    `head_patch` (layer, head, position, row) replace one activation on the way."""
    w, n, heads = weights(), len(tokens), 4
    x = w["embed"][np.frombuffer(tokens, dtype=np.uint8)]
    streams, outputs = [], []
    for layer in range(2):
        if stream_patch and stream_patch[0] == layer:
            x = x.copy()
            x[stream_patch[1]] = stream_patch[2]
        streams.append(x)
        h = norm(x)
        q, k, v = (h @ w[f"layers.{layer}.{m}"] for m in ("w_q", "w_k", "w_v"))
        split = [[a[:, j * 16 : (j + 1) * 16] for j in range(heads)] for a in (q, k, v)]
        per_head = []
        for j in range(heads):
            s = turn(split[0][j], np.arange(n)) @ turn(split[1][j], np.arange(n)).T / 4.0
            s = np.where(np.tril(np.ones((n, n))) > 0, s, -np.inf)
            a = np.exp(s - s.max(axis=1, keepdims=True))
            per_head.append((a / a.sum(axis=1, keepdims=True)) @ split[2][j])
        if head_patch and head_patch[0] == layer:
            per_head[head_patch[1]] = per_head[head_patch[1]].copy()
            per_head[head_patch[1]][head_patch[2]] = head_patch[3]
        outputs.append(per_head)
        x = x + np.hstack(per_head) @ w[f"layers.{layer}.w_o"]
    if stream_patch and stream_patch[0] == 2:
        x = x.copy()
        x[stream_patch[1]] = stream_patch[2]
    streams.append(x)
    return streams, outputs, norm(x) @ w["unembed"]


def test_the_last_layers_lens_is_the_models_own_distribution_bit_for_bit(model):
    tokens = np.frombuffer(b"def f(x):\n    return x", dtype=np.uint8)
    _, streams, heads = lens(model, tokens)
    assert np.array_equal(streams[-1], model.forward(tokens).probabilities)
    _, _, logits = reference(tokens.tobytes())
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    np.testing.assert_allclose(streams[-1], p / p.sum(axis=1, keepdims=True), rtol=1e-10, atol=1e-14)
    assert len(streams) == 3 and heads[0].shape == (4, len(tokens), 256)


def test_identical_texts_give_every_effect_exactly_zero(model):
    same = run(model, np.frombuffer(CLEAN, dtype=np.uint8))
    for component in ("residual", "head_output"):
        _, effect, estimate, flagged = patching(model, same, same, METRIC, component, True)
        assert np.all(effect == 0.0) and np.all(estimate == 0.0) and flagged == []


def test_every_patched_metric_equals_the_reference_and_the_last_stream_restores_the_clean_metric(model):
    clean, corrupted = (run(model, np.frombuffer(t, dtype=np.uint8)) for t in (CLEAN, CORRUPTED))
    streams, outputs, clean_logits = reference(CLEAN)
    patched, effect, _, _ = patching(model, clean, corrupted, METRIC, "residual", False)
    for layer, position in np.ndindex(*patched.shape):
        *_, logits = reference(CORRUPTED, stream_patch=(layer, position, streams[layer][position]))
        assert patched[layer, position] == pytest.approx(logits[-1, ord("Z")] - logits[-1, ord("Y")], abs=1e-12)
    assert patched[2, -1] == METRIC.of(clean, model)  # the last stream's last row: the clean metric, exactly
    assert clean_logits[-1, ord("Z")] - clean_logits[-1, ord("Y")] == pytest.approx(patched[2, -1], abs=1e-12)
    heads, *_ = patching(model, clean, corrupted, METRIC, "head_output", False)
    for layer, head, position in [(0, 1, 5), (1, 2, 11), (1, 3, 0), (0, 0, 11)]:
        *_, logits = reference(CORRUPTED, head_patch=(layer, head, position, outputs[layer][head][position]))
        expected = logits[-1, ord("Z")] - logits[-1, ord("Y")]
        assert heads[layer, head, position] == pytest.approx(expected, abs=1e-12)


def test_a_patch_leaves_every_activation_outside_its_cone_bit_identical(model):
    clean, corrupted = (run(model, np.frombuffer(t, dtype=np.uint8)) for t in (CLEAN, CORRUPTED))
    from service.models.inside import LANDS, patched_head, patched_residual

    for layer, position in [(0, 4), (1, 7), (1, 11)]:
        after = patched_residual(model, corrupted, clean, (layer, position), LANDS["exact"])
        for offset, stream in enumerate(after.streams):
            assert np.array_equal(stream[:position], corrupted.streams[layer + offset][:position])
        head = patched_head(model, corrupted, clean, (layer, 2, position), LANDS["exact"])
        for offset, trace in enumerate(head.layers):
            before = corrupted.layers[layer + offset]
            assert np.array_equal(trace.head_outputs[:, :position], before.head_outputs[:, :position])
            assert np.array_equal(trace.weights[:, :position], before.weights[:, :position])


def test_the_gradients_equal_finite_differences_of_the_reference(model):
    corrupted = run(model, np.frombuffer(CORRUPTED, dtype=np.uint8))
    d_streams, _ = backward(model, corrupted, METRIC.gradient(corrupted, model))
    streams, _, _ = reference(CORRUPTED)
    rng = np.random.default_rng(0)
    for layer, position in [(0, 3), (1, 8), (2, 11), (0, 11)]:
        direction = rng.normal(size=64)
        step = 1e-5
        values = []
        for sign in (1, -1):
            row = streams[layer][position] + sign * step * direction
            *_, logits = reference(CORRUPTED, stream_patch=(layer, position, row))
            values.append(logits[-1, ord("Z")] - logits[-1, ord("Y")])
        numeric = (values[0] - values[1]) / (2 * step)
        assert d_streams[layer][position] @ direction == pytest.approx(numeric, rel=1e-6, abs=1e-9)


def test_the_gradients_equal_torch_autograd(model):
    torch = pytest.importorskip("torch", reason="torch autograd (.ci/run installs the CPU wheel)")
    w = {k: torch.tensor(v, dtype=torch.float64) for k, v in weights().items()}
    n = len(CORRUPTED)
    tokens = torch.tensor(list(CORRUPTED))
    leaves, heads_out = [], []
    x = w["embed"][tokens].clone().requires_grad_(True)
    leaves.append(x)
    pos = torch.arange(n, dtype=torch.float64)
    inv = 10000.0 ** (-torch.arange(0, 16, 2, dtype=torch.float64) / 16)
    cos, sin = torch.cos(torch.outer(pos, inv)), torch.sin(torch.outer(pos, inv))

    def rot(a):
        a1, a2 = a[..., :8], a[..., 8:]
        return torch.cat([a1 * cos - a2 * sin, a2 * cos + a1 * sin], dim=-1)

    for layer in range(2):
        h = torch.nn.functional.layer_norm(x, (64,), eps=1e-5)
        q, k, v = (h @ w[f"layers.{layer}.{m}"] for m in ("w_q", "w_k", "w_v"))
        outs = []
        for j in range(4):
            s = rot(q[:, j * 16 : (j + 1) * 16]) @ rot(k[:, j * 16 : (j + 1) * 16]).T / 4.0
            s = s.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), float("-inf"))
            o = torch.softmax(s, dim=-1) @ v[:, j * 16 : (j + 1) * 16]
            o.retain_grad()
            outs.append(o)
        heads_out.append(outs)
        x = x + torch.cat(outs, dim=-1) @ w[f"layers.{layer}.w_o"]
        x.retain_grad()
        leaves.append(x)
    logits = torch.nn.functional.layer_norm(x, (64,), eps=1e-5) @ w["unembed"]
    (logits[-1, ord("Z")] - logits[-1, ord("Y")]).backward()
    corrupted = run(model, np.frombuffer(CORRUPTED, dtype=np.uint8))
    d_streams, d_heads = backward(model, corrupted, METRIC.gradient(corrupted, model))
    for layer in range(3):
        np.testing.assert_allclose(d_streams[layer], leaves[layer].grad.numpy(), rtol=1e-10, atol=1e-12)
    for layer in range(2):
        for j in range(4):
            np.testing.assert_allclose(d_heads[layer][j], heads_out[layer][j].grad.numpy(), rtol=1e-10, atol=1e-12)


def test_attribution_on_one_head_is_the_hand_computation_and_flags_what_it_misses():
    """q = [1, 2] over keys [1, 0], [0, 1], [1, 1] with values 1, 0, -1, scale 1/sqrt(2); the clean run's
    first key is [3, 1]. Exact effect 0.991257, estimate 0.568724: 57% recovered."""
    q = np.array([[[1.0, 2.0]]])
    values = np.array([[[1.0], [0.0], [-1.0]]])
    scale = 1 / math.sqrt(2)

    def output(keys):
        s = (q[0, 0] @ keys.T) * scale  # [3]
        a = np.exp(s - s.max()) / np.exp(s - s.max()).sum()
        return a, float(a @ values[0, :, 0])

    corrupted_keys, clean_keys = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]), np.array([[3.0, 1.0], [0, 1], [1, 1]])
    a, before = output(corrupted_keys)
    _, after = output(clean_keys)
    _, d_k, _ = attention_backward(q, corrupted_keys[None], values, a[None, None], scale, np.ones((1, 1, 1)))
    estimate = float((clean_keys - corrupted_keys).ravel() @ d_k[0].ravel())
    assert after - before == pytest.approx(0.991257, abs=5e-7)
    assert estimate == pytest.approx(0.568724, abs=5e-7)
    assert estimate / (after - before) == pytest.approx(0.568724 / 0.991257, rel=1e-5)  # 57% recovered
    clean_weights, _ = output(clean_keys)
    assert clean_weights[0] - a[0] > 0.5  # the first key's weight: 0.14 to 0.73, the softmax saturating
    assert flag(after - before, estimate, float(np.abs(clean_weights - a).max())) == "saturated_softmax"
    assert flag(1.0, 0.95, 0.1) is None and flag(1.0, 0.3, 0.1) == "nonlinear" and flag(0.0, 0.0, 0.9) is None


def test_the_model_flags_a_cell_whose_estimate_recovers_under_half_and_names_the_weight_that_moved(model):
    clean, corrupted = (run(model, np.frombuffer(t, dtype=np.uint8)) for t in (CLEAN, CORRUPTED))
    _, effect, estimate, flagged = patching(model, clean, corrupted, METRIC, "head_output", True)
    for flagged_cell in flagged:
        cell = tuple(flagged_cell["cell"])
        moved = flagged_cell["weight"]["change"]
        assert estimate[cell] / effect[cell] < 0.5 or moved > 0.5, flagged_cell
        assert flagged_cell["why"] == ("saturated_softmax" if moved > 0.5 else "nonlinear")
    shares = [estimate[c] / effect[c] for c in np.ndindex(*effect.shape) if abs(effect[c]) > 1e-9]
    assert sum(s < 0.5 for s in shares) <= len(flagged)  # every cell under half is flagged


@pytest.mark.parametrize(
    "mode, component",
    [("patch_position_shifted", "residual"), ("gradient_through_frozen_softmax", "head_output")],
)
def test_each_patching_pitfall_differs_from_the_right_computation(model, mode, component):
    clean, corrupted = (run(model, np.frombuffer(t, dtype=np.uint8)) for t in (CLEAN, CORRUPTED))
    right = patching(model, clean, corrupted, METRIC, component, True)
    broken = patching(model, clean, corrupted, METRIC, component, True, mode)
    if mode == "patch_position_shifted":
        assert broken[1][1, -1] == 0.0 != right[1][1, -1]  # the last position's patch lands past the text
        np.testing.assert_array_equal(broken[1][:, :-1], right[1][:, 1:])  # every effect one column left
    else:
        np.testing.assert_array_equal(broken[1], right[1])  # the same patches
        assert not np.allclose(broken[2], right[2])  # other estimates: no path through the softmax


@pytest.mark.parametrize("mode", ["lens_without_final_norm", "lens_cached_norm_scale"])
def test_each_lens_pitfall_differs_before_the_last_layer_and_the_cached_scale_agrees_on_it(model, mode):
    tokens = np.frombuffer(CLEAN, dtype=np.uint8)
    _, right, _ = lens(model, tokens)
    _, broken, _ = lens(model, tokens, mode)
    assert not np.allclose(broken[0], right[0])
    if mode == "lens_cached_norm_scale":
        np.testing.assert_allclose(broken[-1], right[-1], rtol=1e-12)  # the last stream's own scale
