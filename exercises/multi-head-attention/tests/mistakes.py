"""A plain reference and the classic mistakes, so a failing test can say which one you made.

Reading this file gives the answer away; try the exercise first.
"""

import math

import numpy as np


def split(x, heads, layout="contiguous"):
    n, d_model = x.shape
    d_head = d_model // heads
    if layout == "interleaved":
        return [x[:, h::heads] for h in range(heads)]
    if layout == "first":
        return [x[:, :d_head] for _ in range(heads)]
    return [x[:, h * d_head : (h + 1) * d_head] for h in range(heads)]


def softmax_rows(s):
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def attention(tokens, heads, causal=True, mistake=None, output_projection=None):
    """The correct result, or what an implementation with `mistake` returns."""
    x = np.asarray(tokens, dtype=float)
    n, d_model = x.shape
    d_head = d_model // heads
    layout = {"interleaved_split": "interleaved", "reuse_first_slice": "first"}.get(mistake, "contiguous")
    divisor = {"no_scaling": 1.0, "scale_by_d_model": math.sqrt(d_model)}.get(mistake, math.sqrt(d_head))
    future = np.triu(np.ones((n, n), dtype=bool), k=1)
    weights, outputs = [], []
    for part in split(x, heads, layout):
        s = part @ part.T / divisor
        if not causal or mistake == "no_mask":
            w = softmax_rows(s)
        elif mistake == "mask_after_softmax":
            w = np.where(future, 0.0, softmax_rows(s))
        elif mistake == "diagonal_masked":
            blocked = np.triu(np.ones((n, n), dtype=bool))
            s = np.where(blocked, -np.inf, s)
            with np.errstate(invalid="ignore"):
                w = np.nan_to_num(softmax_rows(np.where(blocked.all(axis=1, keepdims=True), 0.0, s)))
            w[blocked] = 0.0
        elif mistake == "zero_mask":
            w = softmax_rows(np.where(future, 0.0, s))
        elif mistake == "softmax_wrong_axis":
            w = softmax_rows(np.where(future, -np.inf, s).T).T
        else:
            w = softmax_rows(np.where(future, -np.inf, s))
            if mistake == "weights_transposed":
                w = w.T
        weights.append(w)
        outputs.append(w @ part)
    order = outputs[::-1] if mistake == "swapped_head_order" else outputs
    concatenated = np.concatenate(order, axis=1)
    if output_projection is None or mistake == "no_output_projection":
        output = concatenated
    else:
        output = concatenated @ np.asarray(output_projection)
    return {
        "weights": np.array(weights),
        "head_outputs": np.array(outputs),
        "concatenated": concatenated,
        "output": output,
    }


def run(mha, tokens, heads, causal=True, output_projection=None):
    """Call the learner's function and turn its result into arrays (lists are fine too)."""
    kwargs = {} if output_projection is None else {"output_projection": output_projection}
    result = mha(tokens, heads, causal=causal, **kwargs)
    if not isinstance(result, dict):
        raise AssertionError(f"multi_head_attention must return a dict, got {type(result).__name__}")
    missing = {"weights", "head_outputs", "concatenated"} - set(result)
    if missing:
        raise AssertionError(f"the result is missing {sorted(missing)}")
    return {key: np.asarray(value, dtype=float) for key, value in result.items()}


def which(result, tokens, heads, causal, candidates, parts=("weights", "concatenated"), **kwargs):
    """The first candidate mistake that reproduces `result` (on the given parts), else None."""
    for mistake in candidates:
        expected = attention(tokens, heads, causal, mistake, **kwargs)
        if all(result[p].shape == expected[p].shape and np.allclose(result[p], expected[p], atol=1e-9) for p in parts):
            return mistake
    return None


def fmt(values):
    return "[" + ", ".join(f"{v:.3g}" for v in np.ravel(values)) + "]"
