"""An independent reference: multi-head attention written as plain per-head Python loops.

No numpy, no shared code with the engine: lists, `math` and `cmath` only. RoPE is written as
a complex rotation of each feature pair, a different formulation from the engine's.
"""

from __future__ import annotations

import cmath
import math


def matmul(a, b):
    return [[sum(a[i][t] * b[t][j] for t in range(len(b))) for j in range(len(b[0]))] for i in range(len(a))]


def identity(rows, cols):
    return [[1.0 if i == j else 0.0 for j in range(cols)] for i in range(rows)]


def rope_pairs(d_head, style):
    if style == "half":
        return [(i, i + d_head // 2) for i in range(d_head // 2)]
    return [(2 * i, 2 * i + 1) for i in range(d_head // 2)]


def rotate(rows, style, base):
    d_head = len(rows[0])
    out = []
    for pos, row in enumerate(rows):
        new = list(row)
        for i, (a, b) in enumerate(rope_pairs(d_head, style)):
            theta = pos * base ** (-2 * i / d_head)
            z = complex(row[a], row[b]) * cmath.exp(1j * theta)
            new[a], new[b] = z.real, z.imag
        out.append(new)
    return out


def head_columns(h, heads, d_head, failure_mode):
    """Which projected features head h reads, as the (possibly broken) code would."""
    if failure_mode == "reuse_first_slice":
        return list(range(d_head))
    if failure_mode == "interleaved_split":
        return [h + heads * t for t in range(d_head)]
    return list(range(h * d_head, (h + 1) * d_head))


def reference_mha(
    x, heads, causal=True, w_q=None, w_k=None, w_v=None, w_o=None, kv_heads=None, rope=None, failure_mode=None
):
    n, d_model = len(x), len(x[0])
    d_head = d_model // heads
    kv = kv_heads or heads
    group = heads // kv
    divisor = {"no_scaling": 1.0, "scale_by_d_model": math.sqrt(d_model)}.get(failure_mode, math.sqrt(d_head))
    q_all = matmul(x, w_q if w_q is not None else identity(d_model, d_model))
    k_all = matmul(x, w_k if w_k is not None else identity(d_model, kv * d_head))
    v_all = matmul(x, w_v if w_v is not None else identity(d_model, kv * d_head))
    result = {"query": [], "key": [], "value": [], "scores": [], "weights": [], "head_outputs": []}
    for h in range(heads):
        g = h // group
        q_cols = head_columns(h, heads, d_head, failure_mode)
        kv_cols = head_columns(g, kv, d_head, failure_mode)
        q = [[row[c] for c in q_cols] for row in q_all]
        k = [[row[c] for c in kv_cols] for row in k_all]
        v = [[row[c] for c in kv_cols] for row in v_all]
        if rope is not None:
            q = rotate(q, rope["style"], rope.get("base", 10000.0))
            k = rotate(k, rope["style"], rope.get("base", 10000.0))
        scores, weights = [], []
        for i in range(n):
            row = [sum(q[i][t] * k[j][t] for t in range(d_head)) / divisor for j in range(n)]
            future = [causal and j > i for j in range(n)]
            if failure_mode == "mask_after_softmax":  # normalise over everything, then zero the future
                top = max(row)
                exps = [math.exp(s - top) for s in row]
                total = sum(exps)
                weights.append([0.0 if future[j] else exps[j] / total for j in range(n)])
            else:
                top = max(row[j] for j in range(n) if not future[j])
                exps = [0.0 if future[j] else math.exp(row[j] - top) for j in range(n)]
                total = sum(exps)
                weights.append([e / total for e in exps])
            scores.append(row)
        out = [[sum(weights[i][j] * v[j][t] for j in range(n)) for t in range(d_head)] for i in range(n)]
        for key, value in (
            ("query", q),
            ("key", k),
            ("value", v),
            ("scores", scores),
            ("weights", weights),
            ("head_outputs", out),
        ):
            result[key].append(value)
    order = list(range(heads))[::-1] if failure_mode == "swapped_head_order" else list(range(heads))
    concat = [sum((result["head_outputs"][h][i] for h in order), []) for i in range(n)]
    if failure_mode == "no_output_projection":
        output = [list(row) for row in concat]
    else:
        output = matmul(concat, w_o if w_o is not None else identity(d_model, d_model))
    result["concat"] = concat
    result["output"] = output
    result["residual"] = [[x[i][j] + output[i][j] for j in range(d_model)] for i in range(n)]
    return result
