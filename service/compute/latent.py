"""Multi-head latent attention (DeepSeek-V2, arXiv:2405.04434, section 2.1): every head's keys and
values come from one latent vector per token, which is all a cache has to keep.

    C       = X W_DKV                 [n, d_c]       the cache: d_c numbers per token
    K_h     = (C W_UK)_h              [n, d_head]
    V_h     = (C W_UV)_h              [n, d_head]
    k_R     = RoPE(X W_KR)            [n, d_rope]    cached too, one for every head
    q_R,h   = RoPE((X W_QR)_h)        [n, d_rope]
    S_h     = (Q_h K_h^T + q_R,h k_R^T) / sqrt(d_head + d_rope)

Naive: each head's query and key are [content | rope] (width d_head + d_rope) and steps 4-10 go on
as ever. Absorbed (what inference engines run): W_UK folds into the query and W_UV waits until
after the mix, so the scores are taken against the latent itself and K and V are never made:

    q~_h = Q_h W_UK,h^T   [n, d_c];   S_h = (q~_h C^T + q_R,h k_R^T) / sqrt(d_head + d_rope)
    O_h  = (A_h C) W_UV,h [n, d_head]

The same numbers, to rounding. RoPE never turns the content parts: a rotation between W_UK and the
query would stop it folding in, which is why the RoPE part is decoupled.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import AttentionInputError
from .rope import rotate
from .steps import Heads, as_matrix, dot, finite, split_heads

PARTS = ("down", "up_key", "up_value", "rope_key", "rope_query")


@dataclass(frozen=True)
class LatentWeights:
    """W_DKV `[d_model][d_c]`, W_UK and W_UV `[d_c][H*d_head]`, and for decoupled RoPE W_KR
    `[d_model][d_rope]` and W_QR `[d_model][H*d_rope]` (row vectors, `[in][out]`)."""

    down: np.ndarray
    up_key: np.ndarray
    up_value: np.ndarray
    rope_key: np.ndarray | None = None
    rope_query: np.ndarray | None = None
    absorbed: bool = False

    @property
    def d_c(self) -> int:
        return self.down.shape[1]

    @property
    def d_rope(self) -> int:
        return 0 if self.rope_key is None else self.rope_key.shape[1]


def weights(latent: Any, d_model: int, heads: int) -> LatentWeights:
    """A request's `latent` mapping as checked matrices, or an error naming the part at fault."""
    if isinstance(latent, LatentWeights):
        return latent
    if not isinstance(latent, dict) or "down" not in latent or "up_key" not in latent or "up_value" not in latent:
        raise AttentionInputError("latent needs down, up_key and up_value", field="latent")
    m = {part: None if latent.get(part) is None else as_matrix(latent[part], f"latent.{part}") for part in PARTS}
    if (m["rope_key"] is None) != (m["rope_query"] is None):
        missing = "rope_query" if m["rope_query"] is None else "rope_key"
        raise AttentionInputError(
            "decoupled RoPE needs both latent.rope_key and latent.rope_query", field=f"latent.{missing}"
        )
    d_c = m["down"].shape[1]  # type: ignore[union-attr]  # required above
    d_head = d_model // heads if d_model % heads == 0 else None
    d_rope = 0 if m["rope_key"] is None else m["rope_key"].shape[1]
    expected = {
        "down": (d_model, d_c),
        "up_key": (d_c, d_model),
        "up_value": (d_c, d_model),
        "rope_key": (d_model, d_rope),
        "rope_query": (d_model, heads * d_rope),
    }
    meaning = {
        "down": "d_model x d_c",
        "up_key": "d_c x heads*d_head",
        "up_value": "d_c x heads*d_head",
        "rope_key": "d_model x d_rope",
        "rope_query": "d_model x heads*d_rope",
    }
    for part, shape in expected.items():
        have = m[part]
        if have is not None and d_head is not None and have.shape != shape:
            raise AttentionInputError(
                f"latent.{part} must have shape [{shape[0]}][{shape[1]}] ({meaning[part]}), "
                f"got [{have.shape[0]}][{have.shape[1]}]",
                field=f"latent.{part}",
            )
    return LatentWeights(**m, absorbed=bool(latent.get("absorbed", False)))  # type: ignore[arg-type]


def project(x: np.ndarray, qh: np.ndarray, cfg: Any, lw: LatentWeights, positions: np.ndarray | None) -> Heads:
    """Steps 1-3 under latent attention for rows `x` [m, d_model] with their content queries `qh`
    [H, m, d_head]: the latent and RoPE key rows a cache keeps, and each head's whole query."""
    c = finite(dot(x, lw.down), "the latent X @ W_DKV", "latent.down")  # [m, d_model] @ [d_model, d_c] -> [m, d_c]
    if lw.rope_key is None or lw.rope_query is None:
        return Heads(qh, (c, np.empty((x.shape[0], 0))))
    q_r = finite(dot(x, lw.rope_query), "the RoPE query X @ W_QR", "latent.rope_query")  # [m, H * dr]
    q_r = split_heads(q_r, cfg.heads)  # [m, H * dr] -> [H, m, dr]
    k_r = finite(dot(x, lw.rope_key), "the RoPE key X @ W_KR", "latent.rope_key")  # [m, dr]
    slip = cfg.recipe.scaling
    q_rot = finite(rotate(q_r, cfg.rope, positions, slip), "RoPE on the queries", "rope")  # [H, m, dr]
    k_rot = finite(rotate(k_r, cfg.rope, positions, slip), "RoPE on the keys", "rope")  # [m, dr]
    query = np.concatenate([qh, q_rot], axis=-1)  # [H, m, d_head + dr]
    return Heads(query, (c, k_rot), np.concatenate([qh, q_r], axis=-1))


def keys_values(c: np.ndarray, k_r: np.ndarray, cfg: Any, lw: LatentWeights) -> tuple[np.ndarray, np.ndarray]:
    """Every head's keys [H, L, d_head + d_rope] and values [H, L, d_head] from the cached latent
    `c` [L, d_c] and RoPE key `k_r` [L, d_rope] (the naive form: K and V made in full)."""
    k = split_heads(finite(dot(c, lw.up_key), "the keys C @ W_UK", "latent.up_key"), cfg.heads)  # [L, d_c] -> [H, L, d]
    v = split_heads(finite(dot(c, lw.up_value), "the values C @ W_UV", "latent.up_value"), cfg.heads)  # [H, L, d]
    if not k_r.shape[-1]:
        return k, v
    shared = np.broadcast_to(k_r, (cfg.heads, *k_r.shape))  # [L, dr] -> [H, L, dr], one RoPE key for every head
    return np.concatenate([k, shared], axis=-1), v  # [H, L, d_head + dr], [H, L, d_head]


def per_head(w: np.ndarray, heads: int) -> np.ndarray:
    """W_UK or W_UV [d_c, H*d_head] as each head's block [H, d_c, d_head]."""
    d_c, width = w.shape
    return np.ascontiguousarray(w.reshape(d_c, heads, width // heads).transpose(1, 0, 2))


def absorbed_scores(
    query: np.ndarray, cache: tuple[np.ndarray, np.ndarray], cfg: Any, lw: LatentWeights, scale: float
) -> tuple[np.ndarray, np.ndarray]:
    """Step 4 against the latent: queries [H, m, d_head + d_rope] over the cache (`c` [L, d_c], `k_r`
    [L, d_rope]) -> scores [H, m, L], and each head's query in latent space [H, m, d_c]."""
    c, k_r = cache
    d = cfg.d_head
    up_key = per_head(lw.up_key, cfg.heads)  # [H, d_c, d]
    q_latent = dot(query[..., :d], up_key.transpose(0, 2, 1))  # [H, m, d] @ [H, d, d_c] -> [H, m, d_c]: W_UK folded in
    s = dot(q_latent, c.T)  # [H, m, d_c] @ [d_c, L] -> [H, m, L]
    if k_r.shape[-1]:
        s = s + dot(query[..., d:], k_r.T)  # + [H, m, dr] @ [dr, L]
    return finite(s * scale, "the scores", "latent.up_key"), q_latent  # 4.


def attend_absorbed(
    query: np.ndarray,
    cache: tuple[np.ndarray, np.ndarray],
    cfg: Any,
    lw: LatentWeights,
    scale: float,
    normalise: Callable[[np.ndarray], np.ndarray],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """Steps 4-7 against the latent: queries [H, m, d_head + d_rope] over the cache (`c` [L, d_c],
    `k_r` [L, d_rope]); `normalise` turns scores into weights (the mask and softmax, steps 5-6)."""
    s, q_latent = absorbed_scores(query, cache, cfg, lw, scale)  # 4. [H, m, L]
    a = normalise(s)  # 5-6. [H, m, L]
    o_latent = dot(a, cache[0])  # 7. [H, m, L] @ [L, d_c] -> [H, m, d_c]: values mixed in latent space
    o = dot(o_latent, per_head(lw.up_value, cfg.heads))  # [H, m, d_c] @ [H, d_c, d] -> [H, m, d]: W_UV after the mix
    return s, a, o, {"latent_query": q_latent, "latent_output": o_latent}


def naive(engine: dict[str, Any]) -> dict[str, Any]:
    """A call's arguments with keys and values made: an absorbed latent asked in its naive form (the same
    output; the online softmax tiles keys and values)."""
    lat = engine.get("latent")
    return {**engine, "latent": {**lat, "absorbed": False}} if isinstance(lat, dict) and lat.get("absorbed") else engine
