"""Step 5 for any block of queries over any cache: which keys each query sees, from their positions,
and steps 4-7 over what it sees. The full pass is the square case (queries 0..n-1 over keys 0..n-1);
a decode step is a block of queries at positions start.. over the positions its cache holds. Causal
attention is aligned bottom-right: a query at position p sees the key at position j when j <= p, so
a single new query sees every cached position up to its own (docs/conventions.md).

Shapes: H heads, m query rows, L cached keys, d the width of a head's query and key.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np

from .errors import AttentionInputError
from .fused import ROW_BLOCK, attention_heads, causal_mask
from .steps import NORMALISE, attend, check_scores, scores, scores_bound, way_of

POSITIONS = ("original", "cache")


@dataclass(frozen=True)
class Reach:
    """Long contexts as one value: how far back a causal query sees and what else its softmax holds.
    Query i sees key j when i - window < j <= i (`window` keys with itself, Hugging Face's convention)
    or j < sinks; a learned sink logit per head joins each row's softmax denominator only (gpt-oss);
    `positions`: where a decode's RoPE turns its cached keys, at the text's positions (`original`) or
    at their place in a rolling cache (`cache`, StreamingLLM). Built once where a call is prepared."""

    window: int | None = None
    sinks: int = 0
    sink_logit: tuple[float, ...] | None = None
    positions: str = "original"
    stated: bool = field(init=False, compare=False)  # a window or a sink logit given: a trace's `long_context`

    def __post_init__(self) -> None:
        window, sinks = self.window, self.sinks
        if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
            raise AttentionInputError(f"window must be a positive integer, got {window!r}", field="window")
        if isinstance(sinks, bool) or not isinstance(sinks, int) or sinks < 0:
            raise AttentionInputError(f"sinks must be a whole number of positions, got {sinks!r}", field="sinks")
        if self.positions not in POSITIONS:
            raise AttentionInputError(
                f"positions must be 'original' or 'cache', got {self.positions!r}", field="positions"
            )
        if self.sink_logit is not None and not isinstance(self.sink_logit, tuple):
            try:
                logit = tuple(float(z) for z in np.asarray(self.sink_logit, dtype=float).reshape(-1))
            except (TypeError, ValueError):
                raise AttentionInputError("sink_logit must be numbers, one per head", field="sink_logit") from None
            object.__setattr__(self, "sink_logit", logit)  # frozen: set once, here
        object.__setattr__(self, "stated", window is not None or self.sink_logit is not None)

    @classmethod
    def of(cls, value: Reach | Mapping[str, Any] | None) -> Reach:
        """A call's `reach`: the value itself, a mapping of its fields, or None (every key up to the query)."""
        if not value:
            return NO_REACH
        if isinstance(value, Reach):
            return value
        names = {f.name for f in fields(cls) if f.init}
        if not isinstance(value, Mapping) or not set(value) <= names:
            raise AttentionInputError(f"reach is a mapping of {sorted(names)}", field="reach")
        return cls(**value)

    def as_json(self) -> dict[str, Any]:
        return {"window": self.window, "sinks": self.sinks, "sink_logit": self.sink_logit, "positions": self.positions}

    def check(self, causal: bool, heads: int, whole_keys_turned: bool) -> None:
        """What the reach needs of the rest of the call: a causal mask, a sink logit per head, and for
        StreamingLLM's renumbering a window and RoPE turning whole keys (`whole_keys_turned`)."""
        window, sinks, logit = self.window, self.sinks, self.sink_logit
        if (window is not None or sinks) and not causal:
            raise AttentionInputError(
                "a sliding window limits how far back a causal query looks: set causal to true",
                field="window" if window is not None else "sinks",
            )
        if sinks and window is None:
            raise AttentionInputError(
                "sinks are the first positions kept visible beside a sliding window: give a window too", field="sinks"
            )
        if logit is not None:
            if len(logit) != heads:
                raise AttentionInputError(
                    f"sink_logit needs one number per head: {heads}, got {len(logit)}", field="sink_logit"
                )
            if not all(math.isfinite(z) for z in logit):
                raise AttentionInputError("sink_logit must be finite numbers", field="sink_logit")
        if self.positions == "cache" and (window is None or not whole_keys_turned):
            raise AttentionInputError(
                "positions 'cache' turns a rolling cache's keys by RoPE at their place in it (StreamingLLM): it needs "
                "a window and rope, over whole keys (latent attention's decoupled RoPE key is not renumbered here)",
                field="positions",
            )

    def applied(self, way: str, decoding: bool = False) -> Reach:
        """The reach step 5 applies as code doing it `way` does (a recipe's `reach`; in a decode when `decoding`)."""
        return APPLIED[way](self, decoding)


NO_REACH = Reach()

# How each way of applying the reach (failure_modes.Recipe.reach) changes it: exact, one key too many,
# the sinks or the sink logit left out, or the window dropped by the decode alone.
APPLIED: dict[str, Callable[[Reach, bool], Reach]] = {
    "exact": lambda reach, decoding: reach,
    "one_more": lambda reach, decoding: reach if reach.window is None else replace(reach, window=reach.window + 1),
    "no_sinks": lambda reach, decoding: replace(reach, sinks=0),
    "no_sink_logit": lambda reach, decoding: replace(reach, sink_logit=None),
    "decode_unwindowed": lambda reach, decoding: replace(reach, window=None, sinks=0) if decoding else reach,
}


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
    def of_pass(cls, n: int, causal: bool, way: str, reach: Reach = NO_REACH) -> Masking:
        """The square mask of a full pass over n positions (nothing hidden without the causal mask;
        the two ways that misplace the mask apply it even then). A sliding window (and its sinks)
        hides more of the past: the row-blocked causal kernels no longer apply (`square` False)."""
        way = way_of(way, causal)
        lower = causal and n > 1 and NORMALISE[way].lower
        logit = None if reach.sink_logit is None else np.asarray(reach.sink_logit, dtype=float)  # [H]
        if reach.window is not None and reach.window < n:
            positions = np.arange(n)
            return cls(out_of_reach(positions, positions, reach.window, reach.sinks), way, False, lower, logit)
        hidden = causal_mask(n) if causal else np.zeros((n, n), dtype=bool)  # [n, n] the future
        return cls(hidden, way, True, lower, logit)

    @classmethod
    def of_block(cls, query_positions: np.ndarray, key_positions: np.ndarray, way: str, reach: Reach = NO_REACH):
        """A block of queries over a cache: each sees the cached keys at or before its position, and
        within a sliding window only those within it or among its sinks (`reach`, as its recipe applies it)."""
        logit = None if reach.sink_logit is None else np.asarray(reach.sink_logit, dtype=float)  # [H]
        if reach.window is None:
            return cls(future(query_positions, key_positions), way, sink=logit)
        return cls(out_of_reach(query_positions, key_positions, reach.window, reach.sinks), way, sink=logit)

    def weights(self, s: np.ndarray) -> np.ndarray:
        """Steps 5-6: scores [H, m, L] -> weights [H, m, L]; a query that sees no key weighs nothing."""
        if not s.shape[-1]:
            return s.copy()  # [H, m, 0]: nothing cached to attend over
        weights = NORMALISE[self.way].weights(s, self.hidden, self.square)
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
