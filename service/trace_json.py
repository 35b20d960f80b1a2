"""The JSON form of every trace the engine makes (docs/conventions.md), as numpy arrays the JSON codec
writes directly, each array rounded once, whole: a pass (the shape, the conventions block, each
head's arrays and summary, the concatenation, output and residual), a comparison of a correct and a
broken pass, a decode position by position. What the attention resource answers (service/api/attention)
and what each layer of a model's trace is (service/models); below both, above the engine."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .compute import AttentionTrace
from .compute.conventions import conventions
from .compute.decode import DecodeTrace
from .compute.divergence import Comparison
from .compute.failure_modes import REGISTRY
from .compute.online import TiledPass

HEAD_PARTS: tuple[str, ...] = ("query", "key", "value", "query_before_rope", "key_before_rope", "scores")
HEAD_PARTS += ("masked_scores", "weights", "output", "summary")
HEAD_ARRAYS = ("query", "key", "value", "scores", "weights", "output")  # in the order each head lists them
TOP_PARTS = ("concat", "output", "residual")
INCLUDE_CHOICES = sorted({*(f"heads.{p}" for p in HEAD_PARTS), *TOP_PARTS, *HEAD_PARTS})


def shape(trace: AttentionTrace | DecodeTrace) -> dict[str, int]:
    cfg = trace.config
    return {"n": cfg.n, "d_model": cfg.d_model, "heads": cfg.heads, "d_head": cfg.d_head, "kv_heads": cfg.kv_heads}


def head_summary(weights: np.ndarray) -> dict[str, Any]:
    """Row entropy (nats), argmax and max weight per row, share of attention each key receives;
    of one head's weights [n, n] (each value [n]), or of all heads' [H, n, n] at once ([H, n])."""
    log_w = np.log(np.where(weights > 0, weights, 1.0))  # [.., n, n], 0 log 0 = 0 (log 1 where 0)
    return {
        "row_entropy": 0.0 - (weights * log_w).sum(axis=-1),  # [.., n]; 0.0 - 0.0 is 0.0, -(0.0) is -0.0
        "argmax": weights.argmax(axis=-1),  # [.., n]
        "max_weight": weights.max(axis=-1),  # [.., n]
        "column_mass": weights.sum(axis=-2) / weights.shape[-1],  # [.., n], sums to 1 when rows do
    }


def rounded(array: np.ndarray, precision: int | None) -> np.ndarray:
    """`array` to `precision` decimals (as it is when None); +0.0 so no -0.0 is returned."""
    return array if precision is None else np.round(array, precision) + 0.0


def trace_json(
    trace: AttentionTrace,
    include: set[str] | None = None,
    precision: int | None = None,
    *,
    per_head: Callable[[int], dict[str, Any]] | None = None,
    residual: np.ndarray | None = None,
) -> dict:
    """The trace as JSON-ready data: `include` picks parts (every part by default), `precision`
    rounds; a model's layer adds its own fields to each head (`per_head(h)`) and gives its own
    residual stream (`residual`: a layer's stream after it may differ from tokens + output)."""
    wanted = _normalise(include)

    def rnd(a: np.ndarray) -> np.ndarray:  # whole arrays, once: heads are slices of them
        return a if precision is None else rounded(a, precision)

    head_arrays = _head_arrays(trace, wanted["heads"], rnd)
    summaries = (
        {k: (rnd(v) if v.dtype.kind == "f" else v) for k, v in head_summary(trace.weights).items()}
        if "summary" in wanted["heads"]
        else None
    )
    # Without a causal mask (or over one position) nothing is masked; a decode's layout may mask anything.
    masked = (
        _MaskedHeads(head_arrays["scores"], trace.mask)
        if "masked_scores" in wanted["heads"] and trace.config.causal and trace.mask.any()
        else None
    )
    heads = _heads(trace, wanted["heads"], head_arrays, masked, summaries, per_head)
    body: dict[str, Any] = {"shape": shape(trace), "conventions": conventions(trace.config), "heads": heads}
    for part in TOP_PARTS:
        if part in wanted["top"]:
            body[part] = rnd(residual if part == "residual" and residual is not None else getattr(trace, part))
    body["cache"] = cache_shape(trace.config)
    if trace.config.reach.stated:
        body["long_context"] = trace.config.reach.as_json()
    for part in ("latent", "rope_key"):  # latent attention: what its cache holds
        if getattr(trace, part) is not None:
            body[part] = rnd(getattr(trace, part))
    return body


def cache_shape(cfg: Any) -> dict[str, Any]:
    """What a KV cache of this attention holds per token, and once the last position is in, in one layer."""
    per_token = cfg.cache_elements_per_token
    return {"kind": cfg.cache_kind, "elements_per_token": per_token, "elements": cfg.cached_positions * per_token}


def comparison_json(comparison: Comparison, include: set[str] | None = None, precision: int | None = None) -> dict:
    """`POST /attention/compare`: both traces, the differences cell by cell and their largest, where they part."""
    mode = comparison.broken.config.failure_mode
    assert mode is not None
    differences = comparison.differences
    max_abs = {name: float(np.abs(d).max()) for name, d in differences.items()}
    return {
        "failure_mode": {"id": mode, "name": REGISTRY[mode].name, "description": REGISTRY[mode].description},
        "correct": trace_json(comparison.correct, include, precision),
        "broken": trace_json(comparison.broken, include, precision),
        "differences": {**{name: rounded(d, precision) for name, d in differences.items()}, "max_abs": max_abs},
        "divergence": comparison.divergence,
    }


DECODE_ARRAYS = ("query", "key", "value", "scores", "weights", "head_outputs", "concat", "output", "residual")


def decode_json(trace: DecodeTrace, difference: float, precision: int | None = None) -> dict:
    """`POST /attention/decode`: each position's own numbers (the new row of every head over positions
    0..t, and the cache then), and how far the decode is from the full causal pass (`difference`)."""
    cfg = trace.config
    arrays = {
        name: rounded(getattr(trace, name), precision)
        for name in (*DECODE_ARRAYS, "latent_query")
        if getattr(trace, name) is not None
    }
    cache = {name: rounded(part, precision) for name, part in trace.cache.items()}
    return {
        "shape": shape(trace),
        "conventions": conventions(cfg),
        "cache": cache_shape(cfg),
        "prefill": trace.prefill,
        "steps": [_position(trace, arrays, cache, t) for t in range(cfg.n)],  # "steps": the API's name since wave 4
        "max_difference_from_full_pass": difference,
    }


def _position(trace: DecodeTrace, arrays: dict[str, np.ndarray], cache: dict[str, np.ndarray], t: int) -> dict:
    """Position t of a decode: each head's new query, its scores and weights over positions 0..t (null
    where it did not attend), its output; the new row of the concatenation, output and residual; the cache."""
    cfg, seen, held = trace.config, trace.seen[t, : t + 1], trace.cache_positions(t)
    heads = []
    for h, g in enumerate(trace.kv_head.tolist()):
        item: dict[str, Any] = {
            "index": h,
            "kv_head": g,
            "query": arrays["query"][h, t],
            "scores": np.where(seen, arrays["scores"][h, t, : t + 1], np.nan),  # null where not attended
            "weights": arrays["weights"][h, t, : t + 1],
            "output": arrays["head_outputs"][h, t],
        }
        if "key" in arrays and "value" in arrays:
            item.update(key=arrays["key"][h, t], value=arrays["value"][h, t])
        if "latent_query" in arrays:
            item["latent_query"] = arrays["latent_query"][h, t]
        heads.append(item)
    return {
        "position": t,
        "prefill": t < trace.prefill,
        "heads": heads,
        "concat": arrays["concat"][t],
        "output": arrays["output"][t],
        "residual": arrays["residual"][t],
        "cache": {name: part[..., held, :] for name, part in cache.items()},  # with a window, its slots
        **({"cache_positions": held.tolist()} if cfg.reach.window is not None else {}),
        "cache_elements": trace.cache_elements(t),
        **({"rope_positions": trace.rope_positions(t)} if cfg.reach.window is not None and cfg.rope else {}),
    }


def tiled_json(tiled: TiledPass, difference: dict | None, precision: int | None = None) -> dict:
    """`POST /attention/tiled`: each head's tiles in the order computed, with its rows' running values
    after each (null for a skipped tile; null for m and L where a row has seen no key), the output and
    L; the counts, the memory, the largest difference from the plain pass, and where a slip parts."""

    def rnd(a: np.ndarray | None) -> np.ndarray | None:
        return None if a is None else rounded(a, precision)  # -inf is written as null

    heads = []
    for h, head in enumerate(tiled.heads):
        tiles = [
            {
                "query_block": t.query_block,
                "key_block": t.key_block,
                "rows": list(t.rows),
                "keys": list(t.keys),
                "status": t.status,
                "m_before": rnd(t.m_before),
                "m": rnd(t.m),
                "alpha": rnd(t.alpha),
                "l": rnd(t.l),
                "o_tilde": rnd(t.o_tilde),
            }
            for t in head.tiles
        ]
        item = {"index": h, "tiles": tiles, "output": rnd(head.output), "lse": rnd(head.lse)}
        if head.sink is not None:
            item["sink"] = {name: rnd(value) for name, value in head.sink.items()}
        heads.append(item)
    mode = tiled.slip
    assert not isinstance(mode, tuple)  # the API asks for one failure mode; several are the exercise's
    return {
        "block_q": tiled.block_q,
        "block_k": tiled.block_k,
        "failure_mode": None
        if mode is None
        else {"id": mode, "name": REGISTRY[mode].name, "description": REGISTRY[mode].description},
        "heads": heads,
        "tiles": tiled.counts,
        "memory": tiled.memory,
        "max_difference_from_plain": tiled.max_difference_from_plain,
        "first_difference": difference,
    }


def _heads(trace, wanted: set[str], head_arrays, masked, summaries, per_head) -> list[dict[str, Any]]:
    """Each head's item: its index, features, kv head and the parts asked for."""
    extra = ("query_before_rope", "key_before_rope", "latent_query", "latent_output")
    parts = [part for part in (*HEAD_ARRAYS, *extra) if part in wanted or part.startswith("latent_")]
    parts = [part for part in parts if part in head_arrays]
    heads = []
    for h, (features, kv_head) in enumerate(zip(trace.feature_ranges, trace.kv_head.tolist(), strict=True)):
        item: dict[str, Any] = {
            "index": h,
            "features": list(features or ()) or None,
            "feature_indices": trace.features[h],  # an array: a tensor in the binary layout
            "kv_head": kv_head,
        }
        for part in parts:
            item[part] = head_arrays[part][h]
        if "masked_scores" in wanted:
            item["masked_scores"] = head_arrays["scores"][h] if masked is None else masked[h]
        if summaries is not None:
            item["summary"] = {k: v[h] for k, v in summaries.items()}
        if trace.config.reach.sink_logit is not None and "weights" in wanted:
            item["row_sums"] = head_arrays["weights"][h].sum(axis=-1)  # [n] below one: the sink took the rest
        if per_head is not None:
            item.update(per_head(h))
        heads.append(item)
    return heads


def _head_arrays(trace: AttentionTrace, wanted: set[str], rnd: Callable) -> dict[str, np.ndarray]:
    """The per-head arrays asked for, whole [H, ...] (rounded once)."""
    arrays: list[tuple[str, np.ndarray | None]] = [("query", trace.query), ("key", trace.key), ("value", trace.value)]
    arrays += [("scores", trace.scores), ("weights", trace.weights), ("output", trace.head_outputs)]
    arrays += [("query_before_rope", trace.query_before_rope), ("key_before_rope", trace.key_before_rope)]
    arrays += [("latent_query", trace.latent_query), ("latent_output", trace.latent_output)]
    return {
        part: rnd(array)
        for part, array in arrays
        if array is not None
        and (part in wanted or part.startswith("latent_") or (part == "scores" and "masked_scores" in wanted))
    }


class MaskedScores:
    """One head's scores with null where masked, encoded only when JSON is asked for (the binary
    layout carries the scores and a boolean mask instead). NaN where masked: orjson writes NaN as
    null, and scores are finite everywhere else (the engine checks), so no Python lists."""

    def __init__(self, heads: _MaskedHeads, h: int):
        self.heads, self.h = heads, h

    @property
    def mask(self) -> np.ndarray:
        return self.heads.mask

    def to_json(self) -> np.ndarray:
        return self.heads.masked()[self.h]  # [n, n], encoded as null where masked


class _MaskedHeads:
    """Every head's masked scores, from one array operation when the first head is encoded."""

    def __init__(self, scores: np.ndarray, mask: np.ndarray):
        self.scores, self.mask = scores, mask
        self._masked: np.ndarray | None = None

    def masked(self) -> np.ndarray:
        if self._masked is None:
            self._masked = np.where(self.mask, np.nan, self.scores)  # [H, n, n]
        return self._masked

    def __getitem__(self, h: int) -> MaskedScores:
        return MaskedScores(self, h)


def _normalise(include: set[str] | None) -> dict[str, set[str]]:
    if not include:
        return {"heads": set(HEAD_PARTS), "top": set(TOP_PARTS)}
    heads = {p.removeprefix("heads.") for p in include if p.startswith("heads.")}
    top = {p for p in include if p in TOP_PARTS}
    # A bare head part name ("weights", "scores") means the per-head array;
    # "output" alone is the top-level output, "heads.output" the per-head one.
    heads |= {p for p in include if p in HEAD_PARTS and p not in TOP_PARTS}
    return {"heads": heads, "top": top}
