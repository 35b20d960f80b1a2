"""Causal multi-head attention: the exercise starter.

This file runs, but it has three bugs (the lesson names them). Find and fix them until
`pytest exercises/multi-head-attention/tests` passes.

Conventions (see README.md): Q = K = V = the tokens, as in the workbench; head h owns the
contiguous features [h*d_head, (h+1)*d_head); scores are divided by sqrt(d_head); future
scores are set to -inf BEFORE the softmax; head outputs are concatenated in head order.
"""

import numpy as np


def multi_head_attention(tokens, heads, causal=True, output_projection=None):
    x = np.asarray(tokens, dtype=float)  # [n][d_model]
    n, d_model = x.shape
    if d_model % heads != 0:
        raise ValueError(f"d_model {d_model} is not divisible by heads {heads}")
    d_head = d_model // heads

    # Split into heads: [n][d_model] -> [H][n][d_head]
    split = x.reshape(n, d_head, heads).transpose(2, 0, 1)
    q = k = v = split

    weights = np.zeros((heads, n, n))
    head_outputs = np.zeros((heads, n, d_head))
    for h in range(heads):
        scores = q[h] @ k[h].T  # [n][n]
        exp = np.exp(scores - scores.max(axis=1, keepdims=True))
        w = exp / exp.sum(axis=1, keepdims=True)
        if causal:
            w = np.where(np.triu(np.ones((n, n), dtype=bool), k=1), 0.0, w)
        weights[h] = w
        head_outputs[h] = w @ v[h]  # [n][d_head]

    concatenated = np.concatenate([head_outputs[h] for h in range(heads)], axis=1)  # [n][d_model]
    output = concatenated if output_projection is None else concatenated @ np.asarray(output_projection)
    return {"weights": weights, "head_outputs": head_outputs, "concatenated": concatenated, "output": output}
