"""The pipeline: the ten steps (steps.py) in order on every row of X, as a failure mode's `how` does
them; decode.py runs the same steps a block of rows at a time. Large inputs done right take the
fused, row-blocked kernels (fused.py) for steps 4 to 7. Every number in and out is checked finite
(steps.py); an error names the input at fault and the first bad cell, counting from 1.

Shapes: n positions, d_model model width, H heads, d_head = d_model / H.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import latent
from .fused import ROW_BLOCK, attention_heads, causal_mask
from .steps import (
    NORMALISE,
    Heads,
    attend,
    check_scores,
    finite,
    gather_heads,
    merge_heads,
    project,
    repeat_kv,
    rope,
    scores,
    scores_bound,
    split_heads,
)


def project_heads(x: np.ndarray, cfg: Any, w: Any, how: Any, features, kv_features, positions) -> Heads:
    """Steps 1-3 on rows `x` [m, d_model] at `positions` [m], as `how` does them."""
    b_q, b_k, b_v, _ = w.biases
    q = _projected(x, w.query, None, b_q, "query")  # 1. [m, d_model]
    qh = _split(q, features, how.split)  # 2. [m, d_model] -> [H, m, d_head]
    if cfg.latent is not None:
        return latent.project(x, qh, cfg, w.latent, positions)  # 1-3: the latent and the decoupled RoPE parts
    plain_k = w.key is None and b_k is None  # K = X (or its first kv_width columns): nothing to compute
    kv_x = x if cfg.kv_width == cfg.d_model else x[:, : cfg.kv_width]  # the identity's first kv_width columns
    k = kv_x if plain_k else _projected(x, w.key, cfg.kv_width, b_k, "key")  # 1.
    v = k if plain_k and w.value is None and b_v is None else _projected(x, w.value, cfg.kv_width, b_v, "value")
    kh = qh if k is q and kv_features is features else _split(k, kv_features, how.split)  # 2. -> [kv, m, d]
    vh = kh if v is k else _split(v, kv_features, how.split)  # 2. -> [kv, m, d]
    if cfg.rope is None:
        return Heads(qh, (kh, vh))
    qr, kr = (rotated(a, cfg.rope, positions, "query" if a is qh else "key") for a in (qh, kh))  # 3.
    return Heads(qr, (kr, vh), qh, kh)


def rotated(a: np.ndarray, rope_cfg: Any, positions: np.ndarray, name: str) -> np.ndarray:
    """Step 3, checked: RoPE of finite numbers near float64's limit can overflow (the field named is `rope`)."""
    return finite(rope(a, rope_cfg.style, rope_cfg.base, positions), f"RoPE on the {name}s", "rope")


def keys_values(cache: tuple[np.ndarray, np.ndarray], cfg: Any, w: Any, how: Any) -> tuple[np.ndarray, np.ndarray]:
    """What each query head attends with, from what the cache holds: its kv head's keys and values
    ([kv, L, d] -> [H, L, d], as `how` orders them), or under latent attention the up-projections of
    the latent ([L, d_c] -> [H, L, d_head + d_rope] and [H, L, d_head])."""
    if cfg.latent is not None:
        return latent.keys_values(*cache, cfg, w.latent)
    if cfg.group_size == 1:
        return cache  # one key/value head per query head: nothing to repeat
    return repeat_kv(cache[0], cfg.group_size, how.kv_order), repeat_kv(cache[1], cfg.group_size, how.kv_order)


def run(x: np.ndarray, cfg: Any, w: Any, how: Any, features: np.ndarray, kv_features: np.ndarray) -> dict[str, Any]:
    """The ten steps on tokens `x` [n, d_model] (checked finite), as `how` does them."""
    heads = project_heads(x, cfg, w, how, features, kv_features, None)  # 1-3.
    masking = how.mask if cfg.causal or how.mask in ("wrong_axis", "transposed") else "before_softmax"
    mask = causal_mask(cfg.n) if cfg.causal else np.zeros((cfg.n, cfg.n), dtype=bool)  # 5. [n, n] the future
    masks = cfg.causal and cfg.n > 1  # a causal mask over one position masks nothing
    extra: dict[str, Any] = {}
    if cfg.latent is not None and cfg.latent.absorbed:  # 4-7. against the latent itself
        s, a, o, extra = latent.attend_absorbed(
            heads.query, heads.cache, cfg, w.latent, _scale(cfg, how), lambda s: NORMALISE[masking](s, mask)
        )
        kh = vh = None
    else:
        kh, vh = keys_values(heads.cache, cfg, w, how)  # [H, n, d]
        s, a, o = _attend(heads.query, kh, vh, _scale(cfg, how), mask, masking, masks, scores_field(w))  # 4-7.
    plain_k = heads.key_before_rope
    if plain_k is not None:
        plain_k = keys_values((plain_k, plain_k), cfg, w, how)[0]
    if cfg.latent is not None:
        extra.update(latent=heads.cache[0], rope_key=heads.cache[1] if cfg.d_rope else None)
    return {"query": heads.query, "key": kh, "value": vh, "scores": s, "mask": mask, "weights": a,
            "head_outputs": o, **finish(x, o, w, how), "query_before_rope": heads.query_before_rope,
            "key_before_rope": plain_k, **extra}  # fmt: skip


def finish(x: np.ndarray, o: np.ndarray, w: Any, how: Any) -> dict[str, np.ndarray]:
    """Steps 8-10 on head outputs `o` [H, m, d_head] of rows `x` [m, d_model]."""
    concat = merge_heads(o[::-1] if how.order == "reversed" else o)  # 8. [m, d_model]
    b_o = w.biases[3]
    out = concat if how.output == "skip" or (w.output is None and b_o is None) else _out(concat, w.output, b_o)  # 9.
    residual = finite(x + out, "the residual X + output", "tokens")  # 10. X + output: [m, d_model]
    return {"concat": concat, "output": out, "residual": residual}


def _projected(x: np.ndarray, weight, width: int | None, bias, name: str) -> np.ndarray:
    """Step 1 for one of Q, K, V, checked: an overflow names the projection (or its bias, when the
    projection is the identity). The identity of checked tokens is the tokens: nothing to compute."""
    if weight is None and bias is None and (width is None or width == x.shape[1]):
        return x
    field = f"projections.{name}" if weight is not None or bias is None else f"biases.{name}"
    what = f"the {name} projection X @ W_{name[0].upper()}" + (" + b" if bias is not None else "")
    return finite(project(x, weight, width, bias), what, field, None if weight is None and bias is None else True)


def _scale(cfg: Any, how: Any) -> float:
    return cfg.scale if how is cfg.steps else cfg.scale_with(how)  # the checker's mistakes bring their own steps


def scores_field(w: Any) -> str:
    """The input an overflow in the scores is named after: the projection that made the queries, else the tokens."""
    return "projections.query" if w.query is not None else "projections.key" if w.key is not None else "tokens"


def _split(m: np.ndarray, features: np.ndarray, split: str) -> np.ndarray:
    """[n, heads*d_head] -> [heads, n, d_head]: a reshape when the slices are contiguous, else a gather."""
    return split_heads(m, features.shape[0]) if split == "contiguous" else gather_heads(m, features)


def _attend(q, k, v, scale: float, mask: np.ndarray, masking: str, masks: bool, field: str = "tokens"):
    """Steps 4-7. Done right on more than one block of rows, the fused kernels run them a block
    at a time (fused.attention_heads); else they run as whole-array steps, in fewer numpy calls."""
    bound = scores_bound(q, k, scale)
    if masking == "before_softmax" and q.shape[1] > ROW_BLOCK:
        s, a, o = attention_heads(q, k, v, scale, masks, bound)
        check_scores(s, bound, field)
        return s, a, o
    s = scores(q, k, scale)  # 4. [H, n, d] @ [H, d, n] -> [H, n, n]
    check_scores(s, bound, field)
    a = NORMALISE[masking](s, mask)  # 5-6. [H, n, n]
    lower = masks and masking in ("before_softmax", "after_softmax", "diagonal")  # zero above the diagonal
    return s, a, attend(a, v, causal=lower)  # 7. [H, n, d]


def _out(concat: np.ndarray, w_o: np.ndarray | None, b_o: np.ndarray | None = None) -> np.ndarray:
    field = "projections.output" if w_o is not None or b_o is None else "biases.output"
    return finite(
        project(concat, w_o, None, b_o), "the output projection concat @ W_O", field, w_o if b_o is None else True
    )
