"""The seam's contract (service/compute/kv.py): the three key/value sources keep one protocol and, given
weights that make the same keys and values, give the same answers. A latent of width d_model whose
down-projection is the identity and whose up-projections are W_K and W_V makes exactly the keys and values
of grouped heads with W_K and W_V, so grouped heads, the naive latent and the absorbed latent are held to
each other on every method of the protocol, step by step and over a cache."""

import numpy as np
import pytest

from service.compute.decode import decode_attention
from service.compute.engine import multi_head_attention
from service.compute.errors import AttentionInputError
from service.compute.inputs import head_features, prepare
from service.compute.kv import AbsorbedLatent, GroupedHeads, LatentSource, source_of
from service.compute.masks import Masking

RNG = np.random.default_rng(61)
N, D, HEADS = 5, 8, 2
X = RNG.normal(size=(N, D))
W_Q, W_K, W_V, W_O = (RNG.normal(size=(D, D)) * 0.5 for _ in range(4))
GROUPED = {"w_q": W_Q, "w_k": W_K, "w_v": W_V, "w_o": W_O}
LATENT = {"w_q": W_Q, "w_o": W_O, "latent": {"down": np.eye(D), "up_key": W_K, "up_value": W_V}}
SOURCES = {
    "grouped": (GROUPED, GroupedHeads),
    "latent": (LATENT, LatentSource),
    "absorbed": ({**LATENT, "latent": {**LATENT["latent"], "absorbed": True}}, AbsorbedLatent),
}


def source(name):
    arguments, _ = SOURCES[name]
    weights = tuple(arguments.get(name) for name in ("w_q", "w_k", "w_v", "w_o"))
    x, cfg, w = prepare(X, HEADS, True, weights, (None,) * 4, None, None, arguments.get("latent"), None)
    return x, cfg, source_of(cfg, w, cfg.recipe, *head_features(cfg))


@pytest.mark.parametrize("name", SOURCES)
def test_the_config_s_variant_chooses_its_source(name):
    _, _, chosen = source(name)
    assert type(chosen) is SOURCES[name][1]


@pytest.mark.parametrize("name", ["latent", "absorbed"])
def test_every_source_attends_as_grouped_heads_do_given_the_same_keys_and_values(name):
    x, cfg, reference = source("grouped")
    _, _, other = source(name)
    mine, theirs = reference.project(x, None), other.project(x, None)
    np.testing.assert_allclose(theirs.query, mine.query, rtol=0, atol=1e-12)  # [H, n, d_head]
    masking = Masking.of_pass(N, True, "before_softmax")
    right, done = (
        reference.attend(mine.query, mine.cache, cfg.scale, masking),
        other.attend(theirs.query, theirs.cache, cfg.scale, masking),
    )
    for part in ("scores", "weights", "outputs"):
        np.testing.assert_allclose(getattr(done, part), getattr(right, part), rtol=0, atol=1e-12, err_msg=part)
    np.testing.assert_allclose(
        other.scores(theirs.query, theirs.cache, cfg.scale), right.scores, rtol=0, atol=1e-12
    )  # step 4 alone is attend's step 4
    keys, values = other.keys_values(theirs.cache)
    if name == "absorbed":
        assert keys is None and values is None and done.key is None  # never formed
        assert set(done.extra) == {"latent_query", "latent_output"}
    else:
        np.testing.assert_allclose(keys, right.key, rtol=0, atol=1e-12)
        np.testing.assert_allclose(values, right.value, rtol=0, atol=1e-12)
    assert set(other.named(theirs.cache)) == {"latent"} and set(reference.named(mine.cache)) == {"key", "value"}


@pytest.mark.parametrize("name", SOURCES)
def test_each_source_decodes_as_its_pass_and_as_grouped_heads(name):
    arguments = SOURCES[name][0]
    decoded = decode_attention(X, HEADS, prefill=2, **arguments)
    np.testing.assert_allclose(decoded.output, multi_head_attention(X, HEADS, **arguments).output, rtol=0, atol=1e-12)
    np.testing.assert_allclose(decoded.output, multi_head_attention(X, HEADS, **GROUPED).output, rtol=0, atol=1e-12)


def test_the_pass_refuses_what_only_a_decode_computes_and_says_where_it_is():
    with pytest.raises(AttentionInputError, match="decode.one_pass") as refused:
        multi_head_attention(X, HEADS, failure_mode="cache_not_appended")
    assert refused.value.field == "failure_mode"
