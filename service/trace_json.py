"""The JSON form of an engine trace (docs/conventions.md): the shape, the conventions block, each
head's arrays and summary, the concatenation, output and residual, as numpy arrays the JSON codec
writes directly. What `POST /api/v1/attention` answers (service/api/attention) and what each layer
of a model's trace is (service/models); below both, above the engine."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .compute import AttentionTrace
from .compute.conventions import conventions

HEAD_PARTS: tuple[str, ...] = ("query", "key", "value", "query_before_rope", "key_before_rope", "scores")
HEAD_PARTS += ("masked_scores", "weights", "output", "summary")
HEAD_ARRAYS = ("query", "key", "value", "scores", "weights", "output")  # in the order each head lists them
TOP_PARTS = ("concat", "output", "residual")
INCLUDE_CHOICES = sorted({*(f"heads.{p}" for p in HEAD_PARTS), *TOP_PARTS, *HEAD_PARTS})


def shape(trace: AttentionTrace) -> dict[str, int]:
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
    body["cache"] = cache(trace.config)
    for part in ("latent", "rope_key"):  # latent attention: what its cache holds
        if getattr(trace, part) is not None:
            body[part] = rnd(getattr(trace, part))
    return body


def cache(cfg: Any) -> dict[str, Any]:
    """What a KV cache of this attention holds per token, in one layer."""
    return {"kind": cfg.cache_kind, "elements_per_token": cfg.cache_elements_per_token}


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
