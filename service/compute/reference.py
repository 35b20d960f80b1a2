"""The spec of the engine: multi-head attention as the lesson writes it, one head at a time, in
picoGPT's shape (numpy, no blocking, no fused kernels, no shortcuts). `multi_head_attention(...,
reference=True)` computes with this instead of steps.py; the tests hold the two together, and
both to an independent pure-Python loop (tests/compute/reference.py) and to PyTorch.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .errors import AttentionInputError


def softmax(z: np.ndarray, axis: int = -1) -> np.ndarray:
    """exp(z - max) / sum; a row with nothing visible (all -inf) is all zeros."""
    top = np.max(z, axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(z - top)
    total = e.sum(axis=axis, keepdims=True)
    return e / np.where(total > 0, total, 1.0)


def rotate(m: np.ndarray, style: str, base: float) -> np.ndarray:
    """RoPE: position p turns pair i by p * base^(-2i/d_head); "half" pairs i with i + d/2,
    "interleaved" pairs 2i with 2i+1."""
    n, d = m.shape
    out = m.copy()
    for i in range(d // 2):
        a, b = (i, i + d // 2) if style == "half" else (2 * i, 2 * i + 1)
        theta = np.arange(n) * base ** (-2 * i / d)
        out[:, a] = m[:, a] * np.cos(theta) - m[:, b] * np.sin(theta)
        out[:, b] = m[:, b] * np.cos(theta) + m[:, a] * np.sin(theta)
    return out


def weights_of(s: np.ndarray, future: np.ndarray, how: str) -> np.ndarray:
    """Steps 5-6, as each implementation (correct, or a failure mode's) does them."""
    if how == "before_softmax":
        return softmax(np.where(future, -np.inf, s))
    if how == "after_softmax":
        return np.where(future, 0.0, softmax(s))
    if how == "none":
        return softmax(s)
    if how == "diagonal":
        return softmax(np.where(future | np.eye(len(s), dtype=bool), -np.inf, s))
    if how == "zero":
        return softmax(np.where(future, 0.0, s))
    if how == "wrong_axis":
        return softmax(np.where(future, -np.inf, s), axis=0)
    return softmax(np.where(future, -np.inf, s)).T  # transposed


def plain_loop(x: np.ndarray, cfg: Any, w: Any, how: Any, features: np.ndarray, kv_features: np.ndarray) -> dict:
    """The ten steps, head after head (`how`: the failure mode's way of doing them)."""
    n, d_model, d = cfg.n, cfg.d_model, cfg.d_head
    eye = np.eye(d_model)
    widths = (d_model, cfg.kv_width, cfg.kv_width, d_model)
    b_q, b_k, b_v, b_o = (np.zeros(m) if b is None else b for b, m in zip(w.biases, widths, strict=True))  # [out] each
    q = x @ (eye if w.query is None else w.query) + b_q  # 1. [n, d_model]
    k = x @ (eye[:, : cfg.kv_width] if w.key is None else w.key) + b_k  # 1. [n, kv * d_head]
    v = x @ (eye[:, : cfg.kv_width] if w.value is None else w.value) + b_v
    future = np.triu(np.ones((n, n), dtype=bool), k=1) if cfg.causal else np.zeros((n, n), dtype=bool)
    masking = how.mask if cfg.causal or how.mask in ("wrong_axis", "transposed") else "before_softmax"
    scale = {"d_head": 1 / math.sqrt(d), "none": 1.0, "d_model": 1 / math.sqrt(d_model)}[how.scale]
    parts: dict[str, list] = {name: [] for name in ("query", "key", "value", "plain_q", "plain_k", "scores",
                                                     "weights", "head_outputs")}  # fmt: skip
    for h in range(cfg.heads):
        kv = 0 if how.split == "first" else h // cfg.group_size  # the key/value head it reads
        q_h, k_h, v_h = q[:, features[h]], k[:, kv_features[kv]], v[:, kv_features[kv]]  # 2. [n, d_head] each
        parts["plain_q"].append(q_h)
        parts["plain_k"].append(k_h)
        if cfg.rope is not None:
            q_h, k_h = rotate(q_h, cfg.rope.style, cfg.rope.base), rotate(k_h, cfg.rope.style, cfg.rope.base)  # 3.
        s_h = (q_h @ k_h.T) * scale  # 4. [n, n]
        a_h = weights_of(s_h, future, masking)  # 5-6. [n, n]
        for name, value in (("query", q_h), ("key", k_h), ("value", v_h), ("scores", s_h), ("weights", a_h),
                            ("head_outputs", a_h @ v_h)):  # 7. [n, d_head]  # fmt: skip
            parts[name].append(value)
    outputs = parts["head_outputs"][::-1] if how.order == "reversed" else parts["head_outputs"]
    concat = np.hstack(outputs)  # 8. [n, d_model]
    output = concat if how.output == "skip" else concat @ (eye if w.output is None else w.output) + b_o  # 9.
    names = ("query", "key", "value", "scores", "weights", "head_outputs")
    trace: dict[str, np.ndarray | None] = {name: np.array(parts[name]) for name in names}
    trace.update(mask=future, concat=concat, output=output, residual=x + output)  # 10.
    trace["query_before_rope"] = np.array(parts["plain_q"]) if cfg.rope is not None else None
    trace["key_before_rope"] = np.array(parts["plain_k"]) if cfg.rope is not None else None
    for name, value in trace.items():
        if value is not None and value.dtype != np.bool_ and not np.isfinite(value).all():
            raise AttentionInputError(f"{name} overflowed float64; the inputs are too large to compute", field="tokens")
    return trace
