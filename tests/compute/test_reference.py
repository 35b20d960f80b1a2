"""The engine's fast kernels (steps.py, fused.py) equal its spec, the plain per-head loop
(reference.py), for every option and failure mode; and the engine needs numpy alone."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.compute import FAILURE_MODES, multi_head_attention
from service.compute.failure_modes import REGISTRY

from .plain_python import as_engine, slip_context

ROOT = Path(__file__).resolve().parents[2]
PARTS = ("query", "key", "value", "scores", "weights", "head_outputs", "concat", "output", "residual")


@st.composite
def calls(draw):
    heads = draw(st.sampled_from([1, 2, 4]))
    d_head = draw(st.sampled_from([2, 4]))
    d_model, n = heads * d_head, draw(st.integers(1, 6))
    kv_heads = draw(st.sampled_from([k for k in (1, 2, 4) if heads % k == 0]))
    numbers = st.floats(-3, 3, allow_nan=False)
    x = np.array(draw(st.lists(st.lists(numbers, min_size=d_model, max_size=d_model), min_size=n, max_size=n)))
    rng = np.random.default_rng(draw(st.integers(0, 10_000)))
    learned = draw(st.booleans())
    w = {
        "w_q": rng.normal(size=(d_model, d_model)) if learned else None,
        "w_k": rng.normal(size=(d_model, kv_heads * d_head)) if learned else None,
        "w_v": rng.normal(size=(d_model, kv_heads * d_head)) if learned else None,
        "w_o": rng.normal(size=(d_model, d_model)) if draw(st.booleans()) else None,
    }
    options = {
        "causal": draw(st.booleans()),
        "kv_heads": kv_heads,
        "rope": draw(st.sampled_from([None, "half", "interleaved"])),
        # The decoding modes are computed by decoding (tests/compute/test_decode.py checks them).
        "failure_mode": draw(st.sampled_from([None, *(m for m in FAILURE_MODES if not REGISTRY[m].decoding)])),
    }
    return (
        x,
        heads,
        as_engine({**w, **options, **slip_context(options["failure_mode"], heads)}),
    )


@settings(max_examples=300, deadline=None)
@given(calls())
def test_the_fast_kernels_equal_the_plain_per_head_loop(call):
    x, heads, options = call
    fast = multi_head_attention(x, heads, **options)
    spec = multi_head_attention(x, heads, reference=True, **options)
    for part in PARTS:
        np.testing.assert_allclose(getattr(fast, part), getattr(spec, part), rtol=1e-10, atol=1e-12, err_msg=part)
    assert (fast.query_before_rope is None) == (options["rope"] is None)


@pytest.mark.parametrize("causal", [True, False])
def test_large_inputs_take_the_blocked_kernels_and_still_equal_the_spec(causal):
    x = np.random.default_rng(5).normal(size=(300, 64))
    fast = multi_head_attention(x, 4, causal=causal)
    spec = multi_head_attention(x, 4, causal=causal, reference=True)
    for part in PARTS:
        np.testing.assert_allclose(getattr(fast, part), getattr(spec, part), rtol=1e-9, atol=1e-12, err_msg=part)


def test_the_engine_computes_with_numpy_alone_at_full_size(tmp_path):
    """A venv with nothing but numpy: a 512 x 768, 12-head input (the heads over the cores,
    without threadpoolctl) imports and computes."""
    venv = tmp_path / "numpy-only"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", f"numpy=={np.__version__}"], capture_output=True, text=True
    )
    if installed.returncode != 0:
        pytest.skip(f"numpy could not be installed in a fresh venv: {installed.stderr[-300:]}")
    script = (
        "import sys, numpy as np; sys.path.insert(0, sys.argv[1]);"
        "from service.compute import multi_head_attention as mha;"
        "t = mha(np.random.default_rng(0).normal(size=(512, 768)), 12);"
        "assert t.weights.shape == (12, 512, 512) and np.isfinite(t.residual).all();"
        "import importlib.util as u; assert u.find_spec('threadpoolctl') is None and u.find_spec('flask') is None;"
        "print('ok')"
    )
    done = subprocess.run([str(python), "-c", script, str(ROOT)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
