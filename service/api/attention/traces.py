"""The attention resource's answers, arguments -> engine -> body: a pass, the comparison of a correct
and a broken pass, a decode (their JSON form is service/trace_json.py's, numpy arrays going straight
to orjson), sent as JSON or in the safetensors layout. Shared by the views and the background process
that computes large traces (offload.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from flask import current_app, request

from ...compute import AttentionInputError, AttentionTrace, multi_head_attention
from ...compute.decode import decode_attention, one_pass
from ...compute.divergence import compare, max_difference
from ...compute.online import first_difference, tiled_attention
from ...edge.json_codec import dumps_bytes
from ...edge.problems import Problem
from ...trace_json import comparison_json, decode_json, tiled_json, trace_json
from . import safetensors_codec


def respond(body: dict) -> Any:
    """JSON, or the safetensors layout when the client asks for `application/octet-stream`."""
    binary = wants_binary(request.accept_mimetypes)
    return current_app.response_class(encode(body, binary), mimetype=BINARY if binary else "application/json")


LONG_CONTEXT = ("window", "sinks", "sink_logit", "positions")


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
        "rope": rope,
        "latent": args.get("latent"),
        "reach": {name: args[name] for name in LONG_CONTEXT if args.get(name)},  # 0 sinks: none
    }


def compute(args: dict[str, Any], failure_mode: str | None) -> AttentionTrace:
    try:
        return one_pass(args["tokens"], args["heads"], failure_mode=failure_mode, **engine_arguments(args))
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
    """The correct and the broken pass of the same arguments, side by side."""
    w_o = (args.get("projections") or {}).get("output")
    comparison = compare(compute(args, None), compute(args, args["failure_mode"]), w_o)
    return comparison_json(comparison, set(args.get("include") or ()), args.get("precision"))


def decode_body(args: dict[str, Any]) -> dict:
    """`POST /attention/decode`: each position generated with the cache, and how far the decode is
    from the full causal pass computed right (0 up to rounding unless a failure mode breaks it)."""
    kwargs = engine_arguments(args)
    with engine_errors():
        trace = decode_attention(
            args["tokens"],
            args["heads"],
            prefill=args.get("prefill", 1),
            failure_mode=args.get("failure_mode"),
            **kwargs,
        )
        reach = {**kwargs["reach"], "positions": "original"}  # the full pass turns each key at its place in the text
        full = multi_head_attention(args["tokens"], args["heads"], **{**kwargs, "reach": reach})
    return decode_json(trace, max_difference(trace.as_pass(), full), args.get("precision"))


def tiled_body(args: dict[str, Any]) -> dict:
    """`POST /attention/tiled`: the pass's softmax computed online, tile by tile; with a failure mode,
    the broken tiles and where they first part from the right ones."""
    blocks = {"block_q": args["block_q"], "block_k": args["block_k"], **engine_arguments(args)}
    slip = args.get("failure_mode")
    with engine_errors():
        tiled = tiled_attention(args["tokens"], args["heads"], slip=slip, **blocks)
        right = None if slip is None else tiled_attention(args["tokens"], args["heads"], **blocks)
    return tiled_json(tiled, None if right is None else first_difference(right, tiled), args.get("precision"))


BINARY = "application/octet-stream"


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
    return safetensors_codec.encode(*safetensors_codec.body_tensors(body, binary))


def write(body: dict[str, Any], binary: str | None, out: Any) -> None:
    """`encode` into the file `out`: the safetensors layout goes tensor by tensor, not copied whole."""
    if binary is None:
        out.write(dumps_bytes(body))
    else:
        safetensors_codec.write(out.write, *safetensors_codec.body_tensors(body, binary))
