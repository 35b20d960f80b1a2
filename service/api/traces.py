"""Traces for the API: a request's arguments computed by the engine, and the JSON returned
(numpy arrays go straight to orjson). Shared by the attention views and the background path
that computes large traces (heavy.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
from flask import current_app, request

from ..compute import AttentionInputError, AttentionTrace, multi_head_attention
from ..compute.conventions import conventions
from ..compute.divergence import differing, stage_arrays
from ..compute.failure_modes import REGISTRY
from ..edge.json_codec import dumps_bytes
from ..edge.problems import Problem
from . import safetensors_codec

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


def trace_json(trace: AttentionTrace, include: set[str] | None = None, precision: int | None = None) -> dict:
    wanted = _normalise(include)

    def rnd(a: np.ndarray) -> np.ndarray:  # whole arrays, once: heads are slices of them
        return a if precision is None else rounded(a, precision)

    arrays: list[tuple[str, np.ndarray | None]] = [("query", trace.query), ("key", trace.key), ("value", trace.value)]
    arrays += [("scores", trace.scores), ("weights", trace.weights), ("output", trace.head_outputs)]
    arrays += [("query_before_rope", trace.query_before_rope), ("key_before_rope", trace.key_before_rope)]
    head_arrays = {
        part: rnd(array)
        for part, array in arrays
        if array is not None and (part in wanted["heads"] or (part == "scores" and "masked_scores" in wanted["heads"]))
    }
    summaries = (
        {k: (rnd(v) if v.dtype.kind == "f" else v) for k, v in head_summary(trace.weights).items()}
        if "summary" in wanted["heads"]
        else None
    )
    # The engine's only mask is causal; without it, or for a single position, nothing is masked.
    masked = (
        _MaskedHeads(head_arrays["scores"], trace.mask)
        if "masked_scores" in wanted["heads"] and trace.config.causal and trace.config.n > 1
        else None
    )
    parts = [part for part in (*HEAD_ARRAYS, "query_before_rope", "key_before_rope") if part in wanted["heads"]]
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
        if "masked_scores" in wanted["heads"]:
            item["masked_scores"] = head_arrays["scores"][h] if masked is None else masked[h]
        if summaries is not None:
            item["summary"] = {k: v[h] for k, v in summaries.items()}
        heads.append(item)
    body: dict[str, Any] = {"shape": shape(trace), "conventions": conventions(trace.config), "heads": heads}
    for part in TOP_PARTS:
        if part in wanted["top"]:
            body[part] = rnd(getattr(trace, part))
    return body


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


def respond(body: dict) -> Any:
    """JSON, or the safetensors layout when the client asks for `application/octet-stream`."""
    binary = wants_binary(request.accept_mimetypes)
    return current_app.response_class(encode(body, binary), mimetype=BINARY if binary else "application/json")


def compute(args: dict[str, Any], failure_mode: str | None) -> AttentionTrace:
    projections = args.get("projections") or {}
    rope = args.get("rope")
    try:
        return multi_head_attention(
            args["tokens"],
            args["heads"],
            causal=args.get("causal", True),
            w_q=projections.get("query"),
            w_k=projections.get("key"),
            w_v=projections.get("value"),
            w_o=projections.get("output"),
            kv_heads=args.get("kv_heads"),
            rope=None if rope is None else {"style": rope["style"], "base": rope.get("base", 10000.0)},
            failure_mode=failure_mode,
        )
    except AttentionInputError as exc:
        field = exc.field or "tokens"
        raise Problem(422, str(exc), errors={field: [str(exc)]}, slug="invalid-attention-input") from None


def trace_body(args: dict[str, Any], failure_mode: str | None) -> dict:
    trace = compute(args, failure_mode)
    return trace_json(trace, set(args.get("include") or ()), args.get("precision"))


def compare_body(args: dict[str, Any]) -> dict:
    mode = args["failure_mode"]
    correct = compute(args, None)
    broken = compute(args, mode)
    include = set(args.get("include") or ())
    precision = args.get("precision")
    diffs = {
        "weights": broken.weights - correct.weights,
        "head_outputs": broken.head_outputs - correct.head_outputs,
        "concat": broken.concat - correct.concat,
        "output": broken.output - correct.output,
        "residual": broken.residual - correct.residual,
    }
    max_abs = {name: float(np.abs(d).max()) for name, d in diffs.items()}
    if precision is not None:
        diffs = {name: np.round(d, precision) + 0.0 for name, d in diffs.items()}
    w_o = (args.get("projections") or {}).get("output")
    stages = differing(stage_arrays(correct, w_o), stage_arrays(broken, w_o))
    return {
        "failure_mode": {"id": mode, "name": REGISTRY[mode].name, "description": REGISTRY[mode].description},
        "correct": trace_json(correct, include, precision),
        "broken": trace_json(broken, include, precision),
        "differences": {**diffs, "max_abs": max_abs},
        "divergence": {"first": stages[0] if stages else None, "stages": stages},
    }


BINARY = "application/octet-stream"


def body_tensors(body: dict[str, Any], dtype: str = "float64") -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """A trace or comparison body as named tensors plus metadata, for the safetensors layout.

    Every array becomes a tensor named by its path in the JSON body (`heads.1.weights`,
    `differences.concat`); every other value becomes a JSON string in the metadata under its
    path. `masked_scores` (JSON null where masked) becomes a boolean `mask` beside the scores.
    `dtype="float32"` halves the bytes of every floating-point tensor."""
    tensors: dict[str, np.ndarray] = {}
    metadata: dict[str, str] = {}
    float_type = np.float32 if dtype == "float32" else np.float64

    def walk(value: Any, path: str) -> None:
        if isinstance(value, np.ndarray):
            kind = value.dtype.kind
            tensors[path] = value.astype(float_type if kind == "f" else np.int64 if kind in "iu" else bool, copy=False)
        elif isinstance(value, dict):
            for key, item in value.items():
                walk(item, f"{path}.{key}" if path else key)
        elif isinstance(value, MaskedScores):
            # Null where masked, in JSON; here a boolean mask beside the scores (same for every head).
            tensors[path.split("heads.")[0] + "mask"] = np.asarray(value.mask, dtype=bool)
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            for i, item in enumerate(value):
                walk(item, f"{path}.{i}")
        else:
            metadata[path] = orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY).decode()

    walk(body, "")
    return tensors, metadata


def wants_binary(accept: Any) -> str | None:
    """ "float64" or "float32" when the client prefers the safetensors layout
    (`Accept: application/octet-stream`, optionally `; dtype=float32`), else None: JSON."""
    best, best_quality = None, -1.0
    for value, quality in accept:
        if value.split(";")[0].strip() in ("application/json", BINARY) and quality > best_quality:
            best, best_quality = value, quality
    if best is None or not best.startswith(BINARY):
        return None
    return "float32" if "dtype=float32" in best.replace(" ", "") else "float64"


def encode(body: dict[str, Any], binary: str | None) -> bytes:
    """The response bytes: JSON, or the safetensors layout in the requested float type."""
    if binary is None:
        return dumps_bytes(body)
    return safetensors_codec.encode(*body_tensors(body, binary))


def write(body: dict[str, Any], binary: str | None, out: Any) -> None:
    """`encode` into the file `out`: the safetensors layout goes tensor by tensor, not copied whole."""
    if binary is None:
        out.write(dumps_bytes(body))
    else:
        safetensors_codec.write(out.write, *body_tensors(body, binary))
