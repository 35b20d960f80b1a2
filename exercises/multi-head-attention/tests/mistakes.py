"""A plain correct implementation and the classic mistakes, so a failing test can say which one you made.

Reading this file gives the answer away; try the exercise first.
"""

import math

import numpy as np
from learner import LearnerError, call, fmt, nan_problem, say  # noqa: F401 (fmt and say serve the tests)


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
        if mistake == "softmax_wrong_axis":
            w = softmax_rows(np.where(future, -np.inf, s).T if causal else s.T).T
        elif not causal or mistake == "no_mask":
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
    """Call the learner's function through learner.py: what it raises, a wrong shape or type, and
    NaN in what it returns become failures that say what went wrong, without a traceback."""
    import pytest  # here, so trace.py needs numpy alone

    case = {"tokens": tokens, "heads": heads, "causal": causal, "output_projection": output_projection}
    try:
        arrays = call(mha, case)
    except LearnerError as exc:
        pytest.fail(str(exc), pytrace=False)
    problem = nan_problem(arrays, case)
    if problem:
        pytest.fail(problem, pytrace=False)
    return arrays


# Every mistake the correct implementation can be turned into, in the order the pipeline meets them.
ALL = (
    "interleaved_split",
    "reuse_first_slice",
    "no_scaling",
    "scale_by_d_model",
    "no_mask",
    "mask_after_softmax",
    "diagonal_masked",
    "zero_mask",
    "softmax_wrong_axis",
    "weights_transposed",
    "swapped_head_order",
    "no_output_projection",
)


def which(result, tokens, heads, causal, candidates, parts=("weights", "concatenated"), **kwargs):
    """The first candidate mistake that reproduces `result` (on the given parts), else None."""
    for mistake in candidates:
        expected = attention(tokens, heads, causal, mistake, **kwargs)
        if all(result[p].shape == expected[p].shape and np.allclose(result[p], expected[p], atol=1e-9) for p in parts):
            return mistake
    return None


# The mistakes a weights check can recognise by their numbers, in the words the failures use.
SYMPTOMS = {
    m: say(f"symptom_{m}")
    for m in (
        "interleaved_split",
        "reuse_first_slice",
        "no_scaling",
        "scale_by_d_model",
        "softmax_wrong_axis",
        "swapped_head_order",
    )
}


def looks_like(result, tokens, heads, causal, parts=("weights",)):
    """' (this is what happens when ...)' for the known mistake that reproduces `result`, else ''."""
    mistake = which(result, tokens, heads, causal, list(SYMPTOMS), parts=parts)
    return say("looks_like", symptom=SYMPTOMS[mistake], id=mistake) if mistake else ""
