"""Speculative decoding on the trained byte model, against the model written again for the tests
(tests/models/test_inside.py's `reference`, from the safetensors): the verification block equals single
steps and the full pass, the cache after a rollback equals a fresh decode of the accepted prefix,
temperature 0 reproduces the target alone, each round's emitted distribution is p, and each slip is found
at the round where it first shows."""

from __future__ import annotations

import numpy as np
import pytest

from service.compute.failure_modes import recipe_of
from service.models.byte_model import load_models
from service.models.speculate import Decoder, Request, speculate

from .test_inside import MODELS, norm, reference, turn, weights

PROMPTS = [b"def f(x):\n    return ", b"The ", b"q8Lm3Zk7q8Lm3", b"import ", b"x"]


@pytest.fixture(scope="module")
def model():
    return load_models(MODELS)["bytes-2l-attn"]


def reference_probabilities(tokens: bytes) -> np.ndarray:
    """[n, V] the reference forward's next-byte distribution at every position."""
    *_, logits = reference(tokens)
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True)


def reference_cache(tokens: bytes) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each layer's rotated keys and values [H, n, 16] of `tokens`, from the reference's streams."""
    w, n = weights(), len(tokens)
    streams, _, _ = reference(tokens)
    rows = []
    for layer in range(2):
        h = norm(streams[layer])
        k, v = (h @ w[f"layers.{layer}.{m}"] for m in ("w_k", "w_v"))
        rows.append(
            (
                np.stack([turn(k[:, j * 16 : (j + 1) * 16], np.arange(n)) for j in range(4)]),
                np.stack([v[:, j * 16 : (j + 1) * 16] for j in range(4)]),
            )
        )
    return rows


def test_the_verification_block_equals_single_steps_and_the_full_pass(model):
    text = np.frombuffer(b"def f(x):\n    return x + 1", dtype=np.uint8).astype(np.int64)
    prefix, block = text[:20], text[20:]  # a block of gamma + 1 = 6 queries over a cache of 20
    together = Decoder(model, 2, 64)
    together.extend(prefix, 0)
    at_once = together.extend(block, 20)
    stepwise = Decoder(model, 2, 64)
    stepwise.extend(prefix, 0)
    one_by_one = np.concatenate([stepwise.extend(block[i : i + 1], 20 + i) for i in range(len(block))])
    np.testing.assert_allclose(at_once, one_by_one, rtol=0, atol=1e-12)
    np.testing.assert_allclose(at_once, reference_probabilities(bytes(text.astype(np.uint8)))[20:], rtol=0, atol=1e-12)


@pytest.mark.parametrize("draft", ["lens", "bigram"])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_the_cache_after_every_rollback_is_a_fresh_decode_of_the_accepted_prefix(model, draft, temperature):
    prompt = list(b"def f(x):\n    return ")
    done = speculate(model, Request(prompt, 4, 40, temperature, 5, draft, recipe_of(None)))
    text = bytes(prompt + done["tokens"])
    assert len(done["tokens"]) == 40
    assert all(r["cache"]["after"] == r["cache"]["accepted_prefix"] for r in done["rounds"])
    held = done["target"].rows()
    for (keys, values), (ref_keys, ref_values) in zip(held, reference_cache(text[:-1]), strict=True):
        np.testing.assert_allclose(keys, ref_keys, rtol=0, atol=1e-12)
        np.testing.assert_allclose(values, ref_values, rtol=0, atol=1e-12)


@pytest.mark.parametrize("prompt", PROMPTS)
def test_temperature_0_reproduces_the_target_alone_over_64_bytes(model, prompt):
    done = speculate(model, Request(list(prompt), 4, 64, 0.0, 0, "lens", recipe_of(None)))
    text = prompt
    for _ in range(64):  # the reference, one greedy byte at a time, each a whole pass
        text += bytes([int(np.argmax(reference_probabilities(text)[-1]))])
    assert bytes(done["tokens"]) == text[len(prompt) :]


def test_each_rounds_emitted_distribution_is_p_at_a_temperature(model):
    done = speculate(model, Request(list(b"The "), 4, 48, 0.8, 9, "lens", recipe_of(None)))
    tv = [p["total_variation"] for r in done["rounds"] for p in r["positions"]]
    assert len(tv) >= len(done["rounds"]) and max(tv) < 1e-15
    decided = [d for r in done["rounds"] for d in r["drafts"] if "accepted" in d]
    assert any(d["accepted"] for d in decided) and not all(d["accepted"] for d in decided)


@pytest.mark.parametrize(
    "mode", ["residual_from_target", "draft_probabilities_mismatch", "shared_uniform", "cache_not_rolled_back"]
)
def test_each_slip_is_found_at_a_round_where_it_shows(model, mode):
    done = speculate(model, Request(list(b"The "), 4, 48, 0.7, 9, "lens", recipe_of(mode)))
    tv = [max(p["total_variation"] for p in r["positions"]) for r in done["rounds"]]
    caches = [r["cache"]["after"] != r["cache"]["accepted_prefix"] for r in done["rounds"]]
    if mode == "cache_not_rolled_back":
        assert any(caches)  # the rejected drafts' rows stay
        assert max(tv) > 1e-3  # and the bytes that follow read them: p itself moves
    else:
        assert not any(caches) and max(tv) > 1e-3
