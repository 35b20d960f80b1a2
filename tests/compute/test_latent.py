"""Multi-head latent attention (DeepSeek-V2): the naive and absorbed forms give the same numbers,
both equal a plain per-head loop, and with W_DKV the identity it is plain multi-head attention."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.compute import AttentionInputError, multi_head_attention

from .plain_python import reference_mha
from .test_decode import close, mla_weights

PARTS = ("scores", "weights", "head_outputs", "concat", "output", "residual")


@st.composite
def latent_problems(draw):
    heads = draw(st.sampled_from([1, 2, 4]))
    d_head = draw(st.sampled_from([1, 2, 4]))
    d_model, n = heads * d_head, draw(st.integers(1, 6))
    rng = np.random.default_rng(draw(st.integers(0, 10_000)))
    d_c, d_rope = draw(st.integers(1, 9)), draw(st.sampled_from([0, 2, 4]))
    x = rng.normal(size=(n, d_model))
    kwargs = {
        "latent": mla_weights(rng, d_model, heads, d_c, d_rope),
        "causal": draw(st.booleans()),
        "rope": draw(st.sampled_from(["half", "interleaved"])) if d_rope else None,
        "failure_mode": draw(st.sampled_from([None, "no_scaling", "mask_after_softmax", "swapped_head_order"])),
    }
    if draw(st.booleans()):
        kwargs["w_q"] = rng.normal(size=(d_model, d_model)) / np.sqrt(d_model)
        kwargs["w_o"] = rng.normal(size=(d_model, d_model)) / np.sqrt(d_model)
    return x, heads, kwargs


@settings(max_examples=150, deadline=None)
@given(latent_problems())
def test_the_absorbed_form_equals_the_naive_one(problem):
    x, heads, kwargs = problem
    naive = multi_head_attention(x, heads, **kwargs)
    absorbed = multi_head_attention(x, heads, **{**kwargs, "latent": {**kwargs["latent"], "absorbed": True}})
    for part in PARTS:
        assert close(getattr(absorbed, part), getattr(naive, part), 1e-10), part
    assert absorbed.key is None and absorbed.value is None  # K and V are never made
    assert absorbed.latent_query.shape == (heads, x.shape[0], kwargs["latent"]["down"].shape[1])


@settings(max_examples=80, deadline=None)
@given(latent_problems())
def test_latent_attention_equals_the_per_head_loop_written_from_the_paper(problem):
    x, heads, kwargs = problem
    trace = multi_head_attention(x, heads, **kwargs)
    lists = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in kwargs["latent"].items()}
    rope = {"style": kwargs["rope"], "base": 10000.0} if kwargs["rope"] else None
    w = {k: kwargs[k].tolist() for k in ("w_q", "w_o") if k in kwargs}
    ref = reference_mha(
        x.tolist(), heads, kwargs["causal"], latent=lists, rope=rope, failure_mode=kwargs["failure_mode"], **w
    )
    for part in PARTS:
        assert close(getattr(trace, part), ref[part]), part
    assert close(trace.latent, np.array(x) @ kwargs["latent"]["down"])


@pytest.mark.parametrize("kv_heads", [None])
def test_with_the_identity_down_projection_it_is_plain_multi_head_attention(kv_heads):
    """d_c = d_model and W_DKV = I: the latent is X, so K = X W_UK and V = X W_UV."""
    rng = np.random.default_rng(9)
    x = rng.normal(size=(5, 8))
    up_key, up_value = rng.normal(size=(8, 8)), rng.normal(size=(8, 8))
    w_q = rng.normal(size=(8, 8))
    for absorbed in (False, True):
        latent = {"down": np.eye(8), "up_key": up_key, "up_value": up_value, "absorbed": absorbed}
        mla = multi_head_attention(x, 2, w_q=w_q, latent=latent)
        mha = multi_head_attention(x, 2, w_q=w_q, w_k=up_key, w_v=up_value)
        for part in PARTS:
            assert close(getattr(mla, part), getattr(mha, part), 1e-12), part


def test_the_scale_counts_the_decoupled_rope_width():
    rng = np.random.default_rng(10)
    x = rng.normal(size=(3, 8))
    trace = multi_head_attention(x, 2, latent=mla_weights(rng, 8, 2, 4, 2))
    assert trace.config.scale == pytest.approx(1 / np.sqrt(4 + 2))
    assert trace.query.shape == (2, 3, 6) and trace.key.shape == (2, 3, 6) and trace.value.shape == (2, 3, 4)
    assert np.array_equal(trace.key[0, :, 4:], trace.key[1, :, 4:])  # one RoPE key for every head
    assert trace.config.cache_kind == "mla" and trace.config.cache_elements_per_token == 4 + 2


@pytest.mark.parametrize(
    "latent, field",
    [
        ({"down": np.ones((8, 3)), "up_key": np.ones((3, 8))}, "latent"),
        ({"down": np.ones((8, 3)), "up_key": np.ones((4, 8)), "up_value": np.ones((3, 8))}, "latent.up_key"),
        ({"down": np.ones((8, 3)), "up_key": np.ones((3, 8)), "up_value": np.ones((3, 6))}, "latent.up_value"),
        ({"down": np.ones((7, 3)), "up_key": np.ones((3, 8)), "up_value": np.ones((3, 8))}, "latent.down"),
        (
            {
                "down": np.ones((8, 3)),
                "up_key": np.ones((3, 8)),
                "up_value": np.ones((3, 8)),
                "rope_key": np.ones((8, 2)),
            },
            "latent.rope_query",
        ),
        (
            {
                "down": np.ones((8, 3)),
                "up_key": np.ones((3, 8)),
                "up_value": np.ones((3, 8)),
                "rope_key": np.ones((8, 3)),
                "rope_query": np.ones((8, 6)),
            },
            "latent.rope_key",
        ),
        ({"down": [[np.inf] * 3] * 8, "up_key": np.ones((3, 8)), "up_value": np.ones((3, 8))}, "latent.down"),
    ],
)
def test_a_latent_that_does_not_fit_is_refused_by_its_part(latent, field):
    with pytest.raises(AttentionInputError) as info:
        multi_head_attention(np.ones((3, 8)), 2, latent=latent)
    assert info.value.field == field


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"kv_heads": 1}, "kv_heads"),
        ({"failure_mode": "gqa_tiled"}, "failure_mode"),
        ({"failure_mode": "reuse_first_slice"}, "failure_mode"),
        ({"rope": "half"}, "rope"),
        ({"w_k": np.ones((8, 8))}, "projections.key"),
    ],
)
def test_what_latent_attention_does_not_have_is_refused_by_name(kwargs, field):
    latent = {"down": np.ones((8, 3)), "up_key": np.ones((3, 8)), "up_value": np.ones((3, 8))}
    with pytest.raises(AttentionInputError) as info:
        multi_head_attention(np.ones((3, 8)), 2, latent=latent, **kwargs)
    assert info.value.field == field


def test_an_overflow_in_the_latent_names_its_projection():
    latent = {"down": np.full((4, 2), 1e200), "up_key": np.ones((2, 4)), "up_value": np.ones((2, 4))}
    with pytest.raises(AttentionInputError) as info:
        multi_head_attention(np.full((2, 4), 1e200), 2, latent=latent)
    assert info.value.field == "latent.down"
