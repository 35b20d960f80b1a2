"""The trained models as the API answers them: what each head does (measured), and a text run
through a model with every layer's trace (service/trace_json.py), each head labelled, with heads
switched off on request; the byte model's likeliest next bytes. No HTTP here: the views
(service/api/models.py) hand these to the client."""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from ..i18n import current
from ..text import N_
from ..trace_json import trace_json
from . import AnyModel
from .byte_model import ABLATION_SEQUENCES, Model, byte_text
from .encoder import ABLATION_SENTENCES, MAX_CHARACTERS, Encoder


def named(model: AnyModel, scores: np.ndarray) -> dict[str, float]:
    """One head's scores [patterns] by pattern name."""
    return dict(zip(model.patterns, map(float, scores), strict=True))


def head_jobs(model: AnyModel, layer: int) -> list[dict[str, Any]]:
    jobs = []
    for h, scores in enumerate(model.scores[layer]):
        named_scores = named(model, scores)
        jobs.append({"index": h, "label": model.labels[layer][h], "pattern_scores": named_scores})
    return jobs


def in_language(model: AnyModel, field: str, english: str) -> str:
    """A card's words in the request's language, from the card's `translations` (else English)."""
    return model.card.get("translations", {}).get(current(), {}).get(field, english)


def describe(model: AnyModel) -> dict[str, Any]:
    return {
        "id": model.id,
        "description": in_language(model, "description", model.card["description"]),
        "causal": model.causal,
        "reads": "UTF-8 bytes" if model.kind == "bytes" else "WordPiece pieces, [CLS] first and [SEP] last",
        "layers": model.layers,
        "heads": model.heads,
        "d_model": model.d_model,
        "context": model.context,
        "licence": model.card["licences"],
        "measured_on": in_language(model, "measured_on", model.card["head_scores"]["measured_on"]),
        "layer_heads": [head_jobs(model, layer) for layer in range(model.layers)],
    }


def ablated_heads(model: AnyModel, ablate: list[dict[str, int]]) -> frozenset[tuple[int, int]]:
    """The `ablate` list as (layer, head) pairs, or a 422 naming the first that is not in the model."""
    for i, ref in enumerate(ablate):
        if ref["layer"] >= model.layers or ref["head"] >= model.heads:
            message = (
                f"layer {ref['layer']}, head {ref['head']} is not in {model.id}: it has layers 0 to "
                f"{model.layers - 1} and heads 0 to {model.heads - 1} (0-based)"
            )
            raise ModelRequestError(422, message, field=f"ablate.{i}")
    return frozenset((ref["layer"], ref["head"]) for ref in ablate)


def layers_json(model: AnyModel, traces: list, streams: list, off: frozenset, args: dict[str, Any]) -> list[dict]:
    """Every layer's trace, each head with its label and scores (and, with `ablate`, its scores
    with and without the heads off)."""
    include, precision = set(args.get("include") or ()), args.get("precision")
    intact, ablated = model.ablation_scores(off) if off else (model.scores, model.scores)
    layers = []
    for index, trace in enumerate(traces):
        jobs = head_jobs(model, index)

        def per_head(h: int, index: int = index, jobs: list = jobs) -> dict[str, Any]:
            extra = {"label": jobs[h]["label"], "pattern_scores": jobs[h]["pattern_scores"], "off": (index, h) in off}
            if off:
                extra["ablation"] = {
                    "intact": named(model, intact[index, h]),
                    "ablated": named(model, ablated[index, h]),
                }
            return extra

        # the stream after the layer (the byte model: stream + output; BERT: its LayerNorm)
        body = trace_json(trace, include, precision, per_head=per_head, residual=streams[index])
        layers.append({"index": index, **body})
    return layers


def ablation_json(off: frozenset, measured_on: str) -> dict[str, Any]:
    if not off:
        return {}
    return {
        "ablated": [{"layer": layer, "head": head} for layer, head in sorted(off)],
        "ablation_measured_on": measured_on,
    }


def run(model: AnyModel, args: dict[str, Any]) -> dict[str, Any]:
    """A request's text through `model`: every layer's trace, or a 413 when it is longer than the model reads."""
    if isinstance(model, Encoder):
        return encoder_body(model, args["text"], args)
    data = args["text"].encode("utf-8")
    if len(data) > model.context:
        raise over_context(
            model,
            N_("the text is %(count)d bytes in UTF-8; %(model)s reads at most %(limit)d"),
            {"count": len(data), "model": model.id, "limit": model.context},
        )
    return byte_model_body(model, data, args)


def byte_model_body(model: Model, data: bytes, args: dict[str, Any]) -> dict[str, Any]:
    off = ablated_heads(model, args.get("ablate") or [])
    forward = model.forward(np.frombuffer(data, dtype=np.uint8), off)
    layers = layers_json(model, forward.layers, forward.streams, off, args)
    after = [likeliest(row, position + 1, args["top"]) for position, row in enumerate(forward.probabilities)]
    return {
        "model": model.id,
        **ablation_json(off, f"the first {ABLATION_SEQUENCES} of the held-out sequences in measured_on"),
        "tokens": [{"index": i, "byte": int(b), "text": byte_text(int(b))} for i, b in enumerate(data)],
        "shape": layers[0]["shape"],
        "layers": layers,
        "next": after[-1],
        "after": after,
    }


def encoder_body(model: Encoder, text: str, args: dict[str, Any]) -> dict[str, Any]:
    if len(text) > MAX_CHARACTERS:
        raise over_context(
            model,
            N_("the text is %(count)d characters; %(model)s reads at most %(limit)d"),
            {"count": len(text), "model": model.id, "limit": MAX_CHARACTERS},
        )
    pieces = model.tokenize(text)
    if len(pieces.ids) > model.context:
        raise over_context(
            model,
            N_("the text is %(count)d word pieces with [CLS] and [SEP]; %(model)s reads at most %(limit)d"),
            {"count": len(pieces.ids), "model": model.id, "limit": model.context},
        )
    off = ablated_heads(model, args.get("ablate") or [])
    forward = model.forward(pieces, off)
    layers = layers_json(model, forward.layers, forward.streams, off, args)
    tokens = [
        {"index": i, "id": int(piece_id), "text": piece, "start": start, "end": end}
        for i, (piece_id, piece, (start, end)) in enumerate(zip(pieces.ids, pieces.pieces, pieces.offsets, strict=True))
    ]
    return {
        "model": model.id,
        **ablation_json(off, f"the first {ABLATION_SENTENCES} of the held-out sentences in measured_on"),
        "tokens": tokens,
        "shape": layers[0]["shape"],
        "layers": layers,
    }


def over_context(model: AnyModel, message: str, args: dict[str, Any]) -> ModelRequestError:
    return ModelRequestError(413, message, args, limits={"context": model.context})


class ModelRequestError(ValueError):
    """What a model cannot answer: 413 (a text longer than it reads) or 422 (a head it does not
    have), with the message (a catalog msgid with `%(name)s` placeholders), its args, the field at
    fault and, over a limit, the limit. The API answers it as a problem (service/api/models.py)."""

    def __init__(
        self,
        status: int,
        message: str,
        args: dict[str, Any] | None = None,
        *,
        field: str = "text",
        limits: dict[str, int] | None = None,
    ):
        super().__init__(message % args if args else message)
        self.status, self.message, self.values, self.field, self.limits = status, message, args, field, limits

    def __reduce__(self):  # raised in the background process, raised again whole in the worker
        return partial(type(self), field=self.field, limits=self.limits), (self.status, self.message, self.values)


def likeliest(probabilities: np.ndarray, index: int, top: int) -> list[dict[str, Any]]:
    """probabilities [256] -> the `top` likeliest bytes at position `index`, likeliest first."""
    best = np.argsort(-probabilities, kind="stable")[:top]
    return [
        {"index": index, "byte": int(b), "text": byte_text(int(b)), "probability": float(probabilities[b])}
        for b in best
    ]
