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


def reference_mha(x, heads, causal=True, w_q=None, w_k=None, w_v=None, w_o=None, kv_heads=None, rope=None):
    n, d_model = len(x), len(x[0])
    d_head = d_model // heads
    kv = kv_heads or heads
    group = heads // kv
    q_all = matmul(x, w_q if w_q is not None else identity(d_model, d_model))
    k_all = matmul(x, w_k if w_k is not None else identity(d_model, kv * d_head))
    v_all = matmul(x, w_v if w_v is not None else identity(d_model, kv * d_head))
    result = {"query": [], "key": [], "value": [], "scores": [], "weights": [], "head_outputs": []}
    for h in range(heads):
        g = h // group
        q = [row[h * d_head:(h + 1) * d_head] for row in q_all]
        k = [row[g * d_head:(g + 1) * d_head] for row in k_all]
        v = [row[g * d_head:(g + 1) * d_head] for row in v_all]
        if rope is not None:
            q = rotate(q, rope["style"], rope.get("base", 10000.0))
            k = rotate(k, rope["style"], rope.get("base", 10000.0))
        scores, weights = [], []
        for i in range(n):
            row = [sum(q[i][t] * k[j][t] for t in range(d_head)) / math.sqrt(d_head) for j in range(n)]
            visible = [j for j in range(n) if not (causal and j > i)]
            top = max(row[j] for j in visible)
            exps = [math.exp(row[j] - top) if j in visible else 0.0 for j in range(n)]
            total = sum(exps)
            scores.append(row)
            weights.append([e / total for e in exps])
        out = [[sum(weights[i][j] * v[j][t] for j in range(n)) for t in range(d_head)] for i in range(n)]
        for key, value in (("query", q), ("key", k), ("value", v), ("scores", scores),
                           ("weights", weights), ("head_outputs", out)):
            result[key].append(value)
    concat = [sum((result["head_outputs"][h][i] for h in range(heads)), []) for i in range(n)]
    output = matmul(concat, w_o if w_o is not None else identity(d_model, d_model))
    result["concat"] = concat
    result["output"] = output
    result["residual"] = [[x[i][j] + output[i][j] for j in range(d_model)] for i in range(n)]
    return result
