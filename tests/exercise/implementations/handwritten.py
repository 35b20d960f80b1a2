"""A learner's implementation written by hand, with one classic slip chosen by MHA_MISTAKE.

Plain loops and numpy as a learner writes them, independent of the service's engine, so the
exercise tests, `workbench exercise check` and the challenge checker are each tried against
code that really makes the mistake (a masked diagonal really yields NaN; a bad reshape really
raises under MHA_FLOAT_ERRORS=raise). MHA_MISTAKE unset or empty: correct.
"""

import math
import os

import numpy as np

MISTAKE = os.environ.get("MHA_MISTAKE", "")
FLOAT_ERRORS = os.environ.get("MHA_FLOAT_ERRORS")  # "raise": some learners turn numpy's warnings into errors


def softmax(scores, axis=-1):
    e = np.exp(scores - scores.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def multi_head_attention(tokens, heads, causal=True, output_projection=None):
    if FLOAT_ERRORS:
        with np.errstate(all=FLOAT_ERRORS):
            return _attention(tokens, heads, causal, output_projection)
    return _attention(tokens, heads, causal, output_projection)


def _attention(tokens, heads, causal, output_projection):
    x = np.asarray(tokens, dtype=float)
    n, d_model = x.shape
    if d_model % heads:
        raise ValueError(f"d_model {d_model} does not divide into {heads} heads")
    d_head = d_model // heads

    weights, outputs = [], []
    for h in range(heads):
        if MISTAKE == "interleaved_split":
            part = x[:, h::heads]
        elif MISTAKE == "reuse_first_slice":
            part = x[:, 0:d_head]
        else:
            part = x[:, h * d_head : (h + 1) * d_head]
        scores = part @ part.T
        if MISTAKE == "scale_by_d_model":
            scores = scores / math.sqrt(d_model)
        elif MISTAKE != "no_scaling":
            scores = scores / math.sqrt(d_head)
        if causal and MISTAKE == "diagonal_masked":
            scores[np.triu(np.ones((n, n), dtype=bool))] = -np.inf  # j >= i: query 1 sees nothing
        elif causal and MISTAKE == "zero_mask":
            scores[np.triu(np.ones((n, n), dtype=bool), k=1)] = 0.0  # "masked" to 0: still weighed
        elif causal and MISTAKE not in ("no_mask", "mask_after_softmax"):
            scores[np.triu(np.ones((n, n), dtype=bool), k=1)] = -np.inf
        w = softmax(scores, axis=0 if MISTAKE == "softmax_wrong_axis" else -1)
        if causal and MISTAKE == "mask_after_softmax":
            w = w * np.tril(np.ones((n, n)))
        if MISTAKE == "weights_transposed":
            w = w.T
        weights.append(w)
        outputs.append(w @ part)

    ordered = outputs[::-1] if MISTAKE == "swapped_head_order" else outputs
    concatenated = np.concatenate(ordered, axis=1)
    if output_projection is None or MISTAKE == "no_output_projection":
        output = concatenated
    else:
        output = concatenated @ np.asarray(output_projection)
    return {"weights": weights, "head_outputs": outputs, "concatenated": concatenated, "output": output}
