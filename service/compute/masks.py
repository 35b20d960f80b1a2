"""Step 5 for any block of queries over any cache: which keys each query sees, from their positions,
and steps 4-7 over what it sees. The full pass is the square case (queries 0..n-1 over keys 0..n-1);
a decode step is a block of queries at positions start.. over the positions its cache holds. Causal
attention is aligned bottom-right: a query at position p sees the key at position j when j <= p, so
a single new query sees every cached position up to its own (docs/conventions.md).

Shapes: H heads, m query rows, L cached keys, d the width of a head's query and key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .fused import ROW_BLOCK, attention_heads, causal_mask
from .steps import NORMALISE, attend, check_scores, scores, scores_bound


def future(query_positions: np.ndarray, key_positions: np.ndarray) -> np.ndarray:
    """[m, L] True where the key comes after the query: step 5's mask, for any block and any cache."""
    return key_positions[None, :] > query_positions[:, None]


def out_of_reach(query_positions: np.ndarray, key_positions: np.ndarray, window: int, sinks: int) -> np.ndarray:
    """[m, L] True where a causal query with a sliding window does not see the key: in its future, or
    `window` or more positions back (query i sees i - window < j <= i, `window` keys with itself,
    Hugging Face's convention) and not one of the first `sinks` positions."""
    back = query_positions[:, None] - key_positions[None, :]  # [m, L] how far back each key is
    return (back < 0) | ((back >= window) & (key_positions[None, :] >= sinks))


def sink_share(s: np.ndarray, hidden: np.ndarray, logit: np.ndarray) -> np.ndarray:
    """[H, m, 1] what a learned sink logit z leaves of each row: the softmax over the row's visible
    scores and z, the z column dropped, is the plain softmax times sigmoid(LSE - z), LSE the row's
    log-sum-exp. A row that sees nothing keeps nothing."""
    z = np.where(hidden, -np.inf, s)  # [H, m, L]
    top = z.max(axis=-1, keepdims=True)  # [H, m, 1]
    top = np.where(np.isfinite(top), top, 0.0)
    lse = top + np.log(np.exp(z - top).sum(axis=-1, keepdims=True))  # [H, m, 1], -inf where nothing is seen
    return 1.0 / (1.0 + np.exp(logit[:, None, None] - lse))  # [H, m, 1]


@dataclass(frozen=True, eq=False)
class Masking:
    """Which keys each query row sees (`hidden` [m, L] True where not), and how the code at hand
    turns scores into weights (a failure mode's way, `steps.NORMALISE`). `square`: the full pass's
    own causal mask over n positions, where the row-blocked kernels (fused.py) may run."""

    hidden: np.ndarray  # [m, L]
    way: str = "before_softmax"
    square: bool = False
    lower: bool = False  # the weights are zero above the diagonal: the mix may skip those blocks
    sink: np.ndarray | None = None  # [H] a learned sink logit per head: joins each row's denominator

    @classmethod
    def of_pass(
        cls, n: int, causal: bool, way: str, window: int | None = None, sinks: int = 0, sink: Any = None
    ) -> Masking:
        """The square mask of a full pass over n positions (nothing hidden without the causal mask;
        the two ways that misplace the mask apply it even then). A sliding window (and its sinks)
        hides more of the past: the row-blocked causal kernels no longer apply (`square` False)."""
        way = way if causal or way in ("wrong_axis", "transposed") else "before_softmax"
        lower = causal and n > 1 and way in ("before_softmax", "after_softmax", "diagonal")
        logit = None if sink is None else np.asarray(sink, dtype=float)  # [H]
        if window is not None and window < n:
            positions = np.arange(n)
            return cls(out_of_reach(positions, positions, window, sinks), way, False, lower, logit)
        hidden = causal_mask(n) if causal else np.zeros((n, n), dtype=bool)  # [n, n] the future
        return cls(hidden, way, True, lower, logit)

    @classmethod
    def of_block(cls, query_positions: np.ndarray, key_positions: np.ndarray, way: str, reach=(None, 0, None)):
        """A block of queries over a cache: each sees the cached keys at or before its position, and
        within a sliding window only those within it or among its sinks; `reach`: (window, sinks,
        sink logit), as `AttentionConfig.reach_with` gives them."""
        window, sinks, sink = reach
        logit = None if sink is None else np.asarray(sink, dtype=float)  # [H]
        if window is None:
            return cls(future(query_positions, key_positions), way, sink=logit)
        return cls(out_of_reach(query_positions, key_positions, window, sinks), way, sink=logit)

    def weights(self, s: np.ndarray) -> np.ndarray:
        """Steps 5-6: scores [H, m, L] -> weights [H, m, L]; a query that sees no key weighs nothing."""
        if not s.shape[-1]:
            return s.copy()  # [H, m, 0]: nothing cached to attend over
        weights = NORMALISE[self.way](s, self.hidden, self.square)
        if self.sink is not None:
            weights *= sink_share(s, self.hidden, self.sink)  # rows now sum to less than one
        return weights

    def attention(self, q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, field: str):
        """Steps 4-7 over plain keys and values: q [H, m, d], k [H, L, d], v [H, L, d_v] -> scores and
        weights [H, m, L], outputs [H, m, d_v]. The full pass done right on more than one block of
        rows takes the fused kernels; everything else runs as whole-array steps. `field`: the input
        an overflow in the scores is named after."""
        bound = scores_bound(q, k, scale)
        if self.square and self.way == "before_softmax" and self.sink is None and q.shape[1] > ROW_BLOCK:
            s, a, o = attention_heads(q, k, v, scale, self.lower, bound)
            check_scores(s, bound, field)
            return s, a, o
        s = scores(q, k, scale)  # 4. [H, m, d] @ [H, d, L] -> [H, m, L]
        check_scores(s, bound, field)
        a = self.weights(s)  # 5-6. [H, m, L]
        return s, a, attend(a, v, causal=self.lower)  # 7. [H, m, L] @ [H, L, d_v] -> [H, m, d_v]
