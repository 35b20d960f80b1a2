"""What the API answers about the inside of the byte model (service/models/inside.py): the logit lens of
every stream and head, and a patch grid with its estimates; with a pitfall, what it computes beside the
correct computation and where they first part. No HTTP here (service/api/models.py)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..compute.failure_modes import recipe_of
from ..text import N_
from . import AnyModel, inside
from .byte_model import Model, byte_text
from .present import ModelRequestError

PATCH_BYTES = 64  # the longest text a patch grid is computed for: (L + 1) n or L H n runs of the model
NORM_WORDS = {
    "recomputed": "LayerNorm recomputed on each stream (its own mean and variance), then W_U",
    "none": "W_U on the raw stream: no final LayerNorm (failure mode lens_without_final_norm)",
    "cached": "each stream centred, then divided by the last stream's LayerNorm scale (failure mode "
    "lens_cached_norm_scale)",
}


def byte_tokens(
    model: AnyModel, text: str, field: str, limit: int | None = None, limit_name: str = "patch_bytes"
) -> np.ndarray:
    """A text's UTF-8 bytes for the byte model: a 413 past `limit` (its context by default), a 422 for a model
    that reads word pieces."""
    if not isinstance(model, Model):
        raise ModelRequestError(422, N_("%(model)s has no next-byte logits to read"), {"model": model.id}, field=field)
    data, most = text.encode("utf-8"), limit or model.context
    if len(data) > most:
        args = {"count": len(data), "model": model.id, "limit": most}
        message = N_("the text is %(count)d bytes in UTF-8; %(model)s reads at most %(limit)d here")
        name = "context" if limit is None else limit_name
        raise ModelRequestError(413, message, args, field=field, limits={name: most})
    return np.frombuffer(data, dtype=np.uint8)


def read(p: np.ndarray, tokens: np.ndarray, top: int) -> list[dict[str, Any]]:
    """A distribution at every position [n, V]: its `top` bytes, and the byte that comes next (its
    probability and rank, 1 the likeliest; none at the last position)."""
    rows = []
    for i, row in enumerate(p):
        best = np.argsort(-row, kind="stable")[:top]
        nxt = None
        if i + 1 < len(tokens):
            b = int(tokens[i + 1])
            nxt = {"byte": b, "text": byte_text(b), "probability": float(row[b]), "rank": int((row > row[b]).sum()) + 1}
        choices = [{"byte": int(b), "text": byte_text(int(b)), "probability": float(row[b])} for b in best]
        rows.append({"position": i, "top": choices, "next": nxt})
    return rows


def lens_body(model: AnyModel, args: dict[str, Any]) -> dict[str, Any]:
    tokens = byte_tokens(model, args["text"], "text")
    assert isinstance(model, Model)
    slip, top = args.get("failure_mode"), args["top"]
    _, streams, heads = inside.lens(model, tokens, slip)
    body = {
        "model": model.id,
        "tokens": [{"index": i, "byte": int(b), "text": byte_text(int(b))} for i, b in enumerate(tokens)],
        "norm": NORM_WORDS[recipe_of(slip).lens],
        "failure_mode": slip,
        "layers": [{"layer": index, "positions": read(p, tokens, top)} for index, p in enumerate(streams)],
        "heads": [
            {"layer": index, "head": h, "label": model.labels[index][h], "positions": read(p[h], tokens, top)}
            for index, p in enumerate(heads)
            for h in range(model.heads)
        ],
    }
    if slip:
        _, right, _ = inside.lens(model, tokens)
        body["first_difference"] = first_lens_difference(right, streams, tokens)
    return body


def first_lens_difference(right: list[np.ndarray], broken: list[np.ndarray], tokens: np.ndarray) -> dict | None:
    """The first stream and position (layer by layer) where the pitfall's lens differs from the right one."""
    for index, (a, b) in enumerate(zip(right, broken, strict=True)):
        for position in range(len(tokens)):
            if not np.allclose(a[position], b[position], rtol=1e-9, atol=1e-12):
                return {
                    "layer": index,
                    "position": position,
                    "right": read(a[position : position + 1], tokens[position:], 3)[0],
                    "broken": read(b[position : position + 1], tokens[position:], 3)[0],
                }
    return None


def metric_of(given: dict[str, Any]) -> inside.Metric:
    if given["kind"] == "logit_difference":
        pair = given.get("bytes")
        if not pair or len(pair) != 2:
            words = N_("a logit difference needs two bytes, bytes: [a, b] (it measures z_a - z_b)")
            raise ModelRequestError(422, words, field="metric.bytes")
        return inside.Metric("logit_difference", pair[0], pair[1])
    if given.get("byte") is None:
        raise ModelRequestError(422, N_("a probability needs the byte it is of, byte: a"), field="metric.byte")
    return inside.Metric("probability", given["byte"])


def patch_body(model: AnyModel, args: dict[str, Any]) -> dict[str, Any]:
    clean = byte_tokens(model, args["clean"], "clean", PATCH_BYTES)
    corrupted = byte_tokens(model, args["corrupted"], "corrupted", PATCH_BYTES)
    assert isinstance(model, Model)
    if len(corrupted) != len(clean):
        words = N_(
            "the corrupted text is %(corrupted)d bytes and the clean one %(clean)d: a patch takes position p "
            "of one into position p of the other, so both must be as long"
        )
        raise ModelRequestError(422, words, {"corrupted": len(corrupted), "clean": len(clean)}, field="corrupted")
    metric, slip, component = metric_of(args["metric"]), args.get("failure_mode"), args["component"]
    runs = inside.run(model, clean), inside.run(model, corrupted)
    patched, effect, estimate, flagged = inside.patching(model, *runs, metric, component, args["estimate"], slip)
    body = {
        "model": model.id,
        "component": component,
        "failure_mode": slip,
        "clean": {"text": args["clean"], "metric": metric.of(runs[0], model)},
        "corrupted": {"text": args["corrupted"], "metric": metric.of(runs[1], model)},
        "shape": list(effect.shape),
        "patched": patched.tolist(),
        "effect": effect.tolist(),
        "estimate": None if estimate is None else estimate.tolist(),
        "recovered": None if estimate is None else recovered(estimate, effect),
        "flagged": flagged,
    }
    if slip:
        _, right, right_estimate, _ = inside.patching(model, *runs, metric, component, args["estimate"], None)
        body["correct"] = {
            "effect": right.tolist(),
            "estimate": None if right_estimate is None else right_estimate.tolist(),
        }
        body["first_difference"] = first_cell(right, effect, right_estimate, estimate)
    return body


def recovered(estimate: np.ndarray, effect: np.ndarray) -> list:
    """What share of each cell's effect its estimate recovers, in the grid's shape (None where the effect is 0)."""
    share = (estimate / np.where(effect == 0, 1.0, effect)).astype(object)
    share[np.abs(effect) <= 1e-9] = None
    return share.tolist()


def first_cell(right, broken, right_estimate, broken_estimate) -> dict | None:
    """The first cell (in grid order) where the pitfall's effect or estimate differs from the right one."""
    for cell in np.ndindex(*right.shape):
        what = "effect" if not np.isclose(right[cell], broken[cell], rtol=1e-9, atol=1e-12) else None
        if what is None and right_estimate is not None and broken_estimate is not None:
            what = "estimate" if not np.isclose(right_estimate[cell], broken_estimate[cell], rtol=1e-9) else None
        if what:
            return {"cell": list(cell), "what": what}
    return None
