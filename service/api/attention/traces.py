"""The attention resource's traces: a request's arguments computed by the engine, the comparison of
a correct and a broken computation, and the answer as JSON (service/trace_json.py: numpy arrays go
straight to orjson) or the safetensors layout. Shared by the views and the background process that
computes large traces (offload.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import orjson
from flask import current_app, request

from ...compute import AttentionInputError, AttentionTrace, multi_head_attention
from ...compute.conventions import conventions
from ...compute.decode import DecodeTrace, decode_attention, max_difference
from ...compute.divergence import divergence, stage_arrays
from ...compute.failure_modes import REGISTRY
from ...edge.json_codec import dumps_bytes
from ...edge.problems import Problem
from ...trace_json import MaskedScores, cache, rounded, trace_json
from . import safetensors_codec


def respond(body: dict) -> Any:
    """JSON, or the safetensors layout when the client asks for `application/octet-stream`."""
    binary = wants_binary(request.accept_mimetypes)
    return current_app.response_class(encode(body, binary), mimetype=BINARY if binary else "application/json")


def engine_arguments(args: dict[str, Any]) -> dict[str, Any]:
    """A request's arguments as the engine takes them (every one but the tokens, heads and failure mode)."""
    projections = args.get("projections") or {}
    rope = args.get("rope")
    return {
        "causal": args.get("causal", True),
        "w_q": projections.get("query"),
        "w_k": projections.get("key"),
        "w_v": projections.get("value"),
        "w_o": projections.get("output"),
        "kv_heads": args.get("kv_heads"),
        "rope": None if rope is None else {"style": rope["style"], "base": rope.get("base", 10000.0)},
        "latent": args.get("latent"),
    }


def compute(args: dict[str, Any], failure_mode: str | None) -> AttentionTrace:
    try:
        return multi_head_attention(args["tokens"], args["heads"], failure_mode=failure_mode, **engine_arguments(args))
    except AttentionInputError as exc:
        raise refused(exc) from None


@contextmanager
def engine_errors() -> Iterator[None]:
    """The engine's refusals as 422 problems naming the input at fault."""
    try:
        yield
    except AttentionInputError as exc:
        raise refused(exc) from None


def refused(exc: AttentionInputError) -> Problem:
    field = exc.field or "tokens"
    return Problem(422, str(exc), errors={field: [str(exc)]}, slug="invalid-attention-input")


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
    parted = divergence(stage_arrays(correct, w_o), stage_arrays(broken, w_o))
    return {
        "failure_mode": {"id": mode, "name": REGISTRY[mode].name, "description": REGISTRY[mode].description},
        "correct": trace_json(correct, include, precision),
        "broken": trace_json(broken, include, precision),
        "differences": {**diffs, "max_abs": max_abs},
        "divergence": parted,
    }


def decode_body(args: dict[str, Any]) -> dict:
    """`POST /attention/decode`: each position generated with the cache, and how far the decode is
    from the full causal pass computed right (0 up to rounding unless a failure mode breaks it)."""
    kwargs = engine_arguments(args)
    with engine_errors():
        trace = decode_attention(args["tokens"], args["heads"], prefill=args.get("prefill", 1),
                                 failure_mode=args.get("failure_mode"), **kwargs)  # fmt: skip
        full = multi_head_attention(args["tokens"], args["heads"], **kwargs)
    cfg, precision = trace.config, args.get("precision")
    return {
        "shape": {
            "n": cfg.n,
            "d_model": cfg.d_model,
            "heads": cfg.heads,
            "d_head": cfg.d_head,
            "kv_heads": cfg.kv_heads,
        },
        "conventions": conventions(cfg),
        "cache": cache(cfg),
        "prefill": trace.prefill,
        "steps": [decode_step(trace, t, precision) for t in range(cfg.n)],
        "max_difference_from_full_pass": max_difference(trace.as_pass(), full),
    }


def decode_step(trace: DecodeTrace, t: int, precision: int | None) -> dict[str, Any]:
    """Step t's own numbers: the new row of every head over positions 0..t, and the cache then."""
    cfg = trace.config

    def rnd(a: np.ndarray) -> np.ndarray:
        return rounded(a, precision)

    seen = trace.seen[t, : t + 1]
    heads = []
    for h, g in enumerate(trace.kv_head.tolist()):
        item: dict[str, Any] = {
            "index": h,
            "kv_head": g if cfg.latent is None else h,
            "query": rnd(trace.query[h, t]),
            "scores": np.where(seen, rnd(trace.scores[h, t, : t + 1]), np.nan),  # null where not attended
            "weights": rnd(trace.weights[h, t, : t + 1]),
            "output": rnd(trace.head_outputs[h, t]),
        }
        if cfg.latent is None:
            item.update(key=rnd(trace.cache[0][g, t]), value=rnd(trace.cache[1][g, t]))
        elif trace.keys is not None and trace.values is not None:
            item.update(key=rnd(trace.keys[h, t]), value=rnd(trace.values[h, t]))
        if trace.latent_query is not None:
            item["latent_query"] = rnd(trace.latent_query[h, t])
        heads.append(item)
    if cfg.latent is None:
        held = {"key": rnd(trace.cache[0][:, : t + 1]), "value": rnd(trace.cache[1][:, : t + 1])}
    else:
        held = {"latent": rnd(trace.cache[0][: t + 1])}
        if cfg.d_rope:
            held["rope_key"] = rnd(trace.cache[1][: t + 1])
    return {
        "position": t,
        "prefill": t < trace.prefill,
        "heads": heads,
        "concat": rnd(trace.concat[t]),
        "output": rnd(trace.output[t]),
        "residual": rnd(trace.residual[t]),
        "cache": held,
        "cache_elements": trace.cache_elements(t),
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
