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
    """Call the learner's function and turn its result into arrays (lists are fine too).

    What it raises, and NaN in what it returns, become failures that say what went wrong
    (numbers are 1-based, as in the lesson)."""
    kwargs = {} if output_projection is None else {"output_projection": output_projection}
    x = np.asarray(tokens, dtype=float)
    case = f"{x.shape[0]} tokens of width {x.shape[1]}, {heads} heads, causal={causal}"
    try:
        with np.errstate(all="ignore"):  # NaN is reported below, by name, not as a RuntimeWarning
            result = mha(tokens, heads, causal=causal, **kwargs)
    except FloatingPointError as exc:
        hint = f" {DIAGONAL}" if causal else ""
        raise AssertionError(f"multi_head_attention raised FloatingPointError ({exc}) for {case}.{hint}") from None
    except TypeError as exc:
        if kwargs:
            raise  # test_output_projection_is_applied explains a missing output_projection parameter
        raise AssertionError(f"multi_head_attention raised TypeError: {exc} (for {case})") from None
    except Exception as exc:
        raise AssertionError(
            f"multi_head_attention raised {type(exc).__name__}: {exc} (for {case}); it must return the dict "
            "described in README.md"
        ) from None
    if not isinstance(result, dict):
        raise AssertionError(f"multi_head_attention must return a dict, got {type(result).__name__}")
    missing = {"weights", "head_outputs", "concatenated"} - set(result)
    if missing:
        raise AssertionError(f"the result is missing {sorted(missing)}")
    arrays = {key: np.asarray(value, dtype=float) for key, value in result.items()}
    weights = arrays["weights"]
    if weights.ndim == 3 and np.isnan(weights).any():
        h, i = (int(t) + 1 for t in np.argwhere(np.isnan(weights))[0][:2])
        if causal and weights.shape[1] and np.isnan(weights[:, 0]).all():
            raise AssertionError(f"head {h}, query {i}: the weights are NaN (0/0). {DIAGONAL}")
        raise AssertionError(
            f"head {h}, query {i}: the weights are NaN; a softmax over a row whose scores are all -inf, "
            "or an overflow, divides 0 by 0"
        )
    return arrays


DIAGONAL = (
    "The diagonal is masked too: query 1 can see no key at all, so its softmax divides 0 by 0. "
    "A token must attend to itself: mask j > i, not j >= i."
)


def which(result, tokens, heads, causal, candidates, parts=("weights", "concatenated"), **kwargs):
    """The first candidate mistake that reproduces `result` (on the given parts), else None."""
    for mistake in candidates:
        expected = attention(tokens, heads, causal, mistake, **kwargs)
        if all(result[p].shape == expected[p].shape and np.allclose(result[p], expected[p], atol=1e-9) for p in parts):
            return mistake
    return None


# What each mistake looks like, in the words the failures use (see test_multi_head_attention.py).
SYMPTOMS = {
    "interleaved_split": "the features were interleaved across heads",
    "reuse_first_slice": "each head read the same slice as head 1",
    "no_scaling": "the scores were not divided by sqrt(d_head)",
    "scale_by_d_model": "the scores were divided by sqrt(d_model) instead of sqrt(d_head)",
    "softmax_wrong_axis": "the softmax ran over the queries (columns) instead of the keys",
    "swapped_head_order": "the heads were concatenated in reverse order",
}


def looks_like(result, tokens, heads, causal, parts=("weights",)):
    """' (this is what happens when ...)' for the known mistake that reproduces `result`, else ''."""
    mistake = which(result, tokens, heads, causal, list(SYMPTOMS), parts=parts)
    return f" (this is what happens when {SYMPTOMS[mistake]})" if mistake else ""


def fmt(values):
    return "[" + ", ".join(f"{v:.3g}" for v in np.ravel(values)) + "]"
