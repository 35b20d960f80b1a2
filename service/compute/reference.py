"""The spec of the engine: multi-head attention as the lesson writes it, one head at a time, in
picoGPT's shape (numpy, no blocking, no fused kernels, no shortcuts). `multi_head_attention(...,
reference=True)` computes with this instead of pipeline.py; the tests hold the two together, and
both to an independent pure-Python loop (tests/compute/plain_python.py) and to PyTorch. Latent
attention is spelled out naively here (every head's K and V made from the latent); an overflow
names the same input the engine names.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import AttentionInputError
from .scaling import frequencies
from .steps import scores_field, way_of


def softmax(z: np.ndarray, axis: int = -1) -> np.ndarray:
    """exp(z - max) / sum; a row with nothing visible (all -inf) is all zeros."""
    top = np.max(z, axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(z - top)
    total = e.sum(axis=axis, keepdims=True)
    return e / np.where(total > 0, total, 1.0)


def rotate(m: np.ndarray, rope: Any, slip: str) -> np.ndarray:
    """RoPE: the row at position p (the offset plus its index) turns pair i by p * theta_i, the pair's
    frequency as its scaling sets it (rope.frequencies), cos and sin times the attention factor; "half"
    pairs i with i + d/2, "interleaved" pairs 2i with 2i+1."""
    n, d = m.shape
    f = frequencies(rope.base, rope.scaling, d, rope.offset + n, slip)
    out = m.copy()
    for i in range(d // 2):
        a, b = (i, i + d // 2) if rope.style == "half" else (2 * i, 2 * i + 1)
        theta = (rope.offset + np.arange(n)) * f.scaled[i]
        cos, sin = np.cos(theta) * f.attention_factor, np.sin(theta) * f.attention_factor
        out[:, a] = m[:, a] * cos - m[:, b] * sin
        out[:, b] = m[:, b] * cos + m[:, a] * sin
    return check(out, "rope")


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


def kept_beside(sink: float, s: np.ndarray, future: np.ndarray) -> np.ndarray:
    """[n, 1] what each row keeps beside a learned sink logit: the sink joins the softmax as one more
    column, whose weight is then dropped."""
    return 1.0 - softmax(np.hstack([np.where(future, -np.inf, s), np.full((len(s), 1), sink)]))[:, -1:]


def hidden_of(n: int, cfg: Any, how: Any) -> tuple[np.ndarray, Any]:
    """[n, n] the keys each query does not see: its future, and under a sliding window the keys
    `window` or more back that are not sinks (as `how` applies them); and the sink logit it applies."""
    reach = cfg.reach.applied(how.reach)
    window, sinks, sink = reach.window, reach.sinks, reach.sink_logit
    hidden = np.triu(np.ones((n, n), dtype=bool), k=1) if cfg.causal else np.zeros((n, n), dtype=bool)
    for i in range(n) if window is not None else ():
        for j in range(i + 1):
            hidden[i, j] = i - j >= window and j >= sinks
    return hidden, sink


def check(a: np.ndarray, field: str) -> np.ndarray:
    if not np.isfinite(a).all():
        raise AttentionInputError(f"{field} overflowed float64; the inputs are too large to compute", field=field)
    return a


def projected(x: np.ndarray, weight, bias, width: int, name: str) -> np.ndarray:
    """Step 1 for one projection (the identity's first `width` columns when `weight` is None)."""
    eye = np.eye(x.shape[1])[:, :width]
    y = x @ (eye if weight is None else weight) + (0.0 if bias is None else bias)
    return check(y, f"projections.{name}" if weight is not None or bias is None else f"biases.{name}")


def plain_loop(x: np.ndarray, cfg: Any, w: Any, how: Any, features: np.ndarray, kv_features: np.ndarray) -> dict:
    """The ten steps, head after head (`how`: the failure mode's way of doing them)."""
    n, d_model, b_o = cfg.n, cfg.d_model, w.biases[3]
    q, k, v, c = projected_all(x, cfg, w)  # 1.
    future, sink = hidden_of(n, cfg, how)
    masking = way_of(how.mask, cfg.causal)
    scale = cfg.scale_with(how)
    names = ("query", "key", "value", "plain_q", "plain_k", "scores", "weights", "head_outputs")
    parts: dict[str, list] = {name: [] for name in names}
    for h in range(cfg.heads):
        kv = kv_of(h, cfg, how)  # the key/value head it reads
        cols = features[h] if cfg.latent is not None else kv_features[kv]
        q_h, k_h, v_h = q[:, features[h]], k[:, cols], v[:, cols]  # 2. [n, d_head] each
        parts["plain_q"].append(q_h)
        parts["plain_k"].append(k_h)
        if cfg.latent is not None and cfg.d_rope:
            q_h, k_h = with_rope_parts(x, q_h, k_h, h, cfg, w.latent, how.scaling)  # [n, d_head + d_rope] each
        elif cfg.rope is not None:
            q_h, k_h = rotate(q_h, cfg.rope, how.scaling), rotate(k_h, cfg.rope, how.scaling)  # 3.
        s_h = check((q_h @ k_h.T) * scale, scores_field(w))  # 4. [n, n]
        a_h = weights_of(s_h, future, masking)  # 5-6. [n, n]
        a_h = a_h if sink is None else a_h * kept_beside(sink[h], s_h, future)  # a sink's share
        for name, value in (
            ("query", q_h),
            ("key", k_h),
            ("value", v_h),
            ("scores", s_h),
            ("weights", a_h),
            ("head_outputs", a_h @ v_h),
        ):  # 7. [n, d_head]
            parts[name].append(value)
    outputs = parts["head_outputs"][::-1] if how.order == "reversed" else parts["head_outputs"]
    concat = np.hstack(outputs)  # 8. [n, d_model]
    output = concat if how.output == "skip" else concat @ (np.eye(d_model) if w.output is None else w.output)  # 9.
    out_field = "projections.output" if w.output is not None or b_o is None else "biases.output"
    output = check(output + (0.0 if b_o is None or how.output == "skip" else b_o), out_field)
    trace: dict[str, np.ndarray | None] = {name: np.array(parts[name]) for name in names[:3] + names[5:]}
    trace.update(mask=future, concat=concat, output=output, residual=check(x + output, "tokens"))  # 10.
    rotated = cfg.rope is not None and cfg.latent is None
    trace["query_before_rope"] = np.array(parts["plain_q"]) if rotated else None
    trace["key_before_rope"] = np.array(parts["plain_k"]) if rotated else None
    if cfg.latent is not None:
        trace["latent"] = c
        trace["rope_key"] = rotate(x @ w.latent.rope_key, cfg.rope, how.scaling) if cfg.d_rope else None
        trace["query_before_rope"] = None
    return trace


def projected_all(x: np.ndarray, cfg: Any, w: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """Step 1: Q [n, d_model], K and V [n, kv * d_head] (under latent attention [n, H * d_head], every head
    its own, made from the latent C [n, d_c], returned last; else None)."""
    b_q, b_k, b_v, _ = w.biases
    q = projected(x, w.query, b_q, cfg.d_model, "query")
    if cfg.latent is None:
        return q, projected(x, w.key, b_k, cfg.kv_width, "key"), projected(x, w.value, b_v, cfg.kv_width, "value"), None
    c = check(x @ w.latent.down, "latent.down")
    return q, check(c @ w.latent.up_key, "latent.up_key"), check(c @ w.latent.up_value, "latent.up_value"), c


def kv_of(h: int, cfg: Any, how: Any) -> int:
    """The key/value head query head h reads: repeated in place (h // group), or tiled (the bug)."""
    if how.split == "first":
        return 0
    return h % cfg.kv_heads if how.kv_order == "tile" else h // cfg.group_size


def with_rope_parts(x, q_h, k_h, h, cfg, lat, slip: str) -> tuple[np.ndarray, np.ndarray]:
    """Latent attention's decoupled RoPE: head h's query and key grow by their rotated RoPE parts."""
    dr = cfg.d_rope
    q_r = rotate(check(x @ lat.rope_query, "latent.rope_query")[:, h * dr : (h + 1) * dr], cfg.rope, slip)
    k_r = rotate(check(x @ lat.rope_key, "latent.rope_key"), cfg.rope, slip)  # one for every head
    return np.hstack([q_h, q_r]), np.hstack([k_h, k_r])
