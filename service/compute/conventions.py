"""The conventions that applied to one computation, as plain data (see docs/conventions.md)."""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

from .config import ROPE_STYLES, AttentionConfig
from .failure_modes import FAILURE_MODES


@lru_cache(maxsize=256)
def conventions(cfg: AttentionConfig) -> dict[str, Any]:
    """The conventions of `cfg` (one dict per config, shared: read it, do not change it)."""
    mode = cfg.failure_mode or ""
    scale_text, split, mask = _scale(cfg, mode), _split(mode), _mask(cfg, mode)
    return {
        "vectors": "row vectors: Q = X @ W_Q; weights are [in][out]",
        "dtype": "float64",
        "head_split": split,
        "scale": scale_text,
        "scale_value": cfg.scale,
        "mask": mask,
        "masked_scores": "null where masked",
        "fully_masked_rows": "all-zero weights, never NaN (as PyTorch SDPA)",
        "softmax": "per row, numerically stable (the row max subtracted, unless a bound proves every |score| <= 600)",
        "concatenation": "reverse head order (failure mode swapped_head_order)"
        if mode == "swapped_head_order"
        else "head order: [O_0 | O_1 | ...]",
        "output_projection": "skipped: output = concat (failure mode no_output_projection)"
        if mode == "no_output_projection"
        else "output = concat @ W_O; residual = tokens + output",
        "projections_default": "identity",
        "rope": None
        if cfg.rope is None
        else {
            "style": cfg.rope.style,
            "description": ROPE_STYLES[cfg.rope.style],
            "base": cfg.rope.base,
            "applied_to": "query and key, after the head split; position = token index",
        },
        **cfg.variant.conventions(cfg, mode),  # "grouped_query" and "latent"
        "failure_mode": None if not mode else {"id": mode, "description": FAILURE_MODES[mode]},
        "entropy_unit": f"nats (a uniform row over k keys has entropy ln k; ln {cfg.n} = {math.log(cfg.n):.4f})",
    }


def _scale(cfg: AttentionConfig, mode: str) -> str:
    width = (
        f"sqrt(d_head + d_rope) = sqrt({cfg.d_head + cfg.d_rope})"
        if cfg.d_rope
        else f"sqrt(d_head) = sqrt({cfg.d_head})"
    )
    return {
        "no_scaling": "scores are not scaled (failure mode no_scaling)",
        "scale_by_d_model": f"scores divided by sqrt(d_model) = sqrt({cfg.d_model}) (failure mode scale_by_d_model)",
    }.get(mode, f"scores divided by {width}")


def _split(mode: str) -> str:
    return {
        "reuse_first_slice": "every head reads features [0, d_head) (failure mode reuse_first_slice)",
        "interleaved_split": "head h reads features h, h+H, h+2H, ... (failure mode interleaved_split)",
    }.get(mode, "contiguous: head h owns features [h*d_head, (h+1)*d_head)")


def _mask(cfg: AttentionConfig, mode: str) -> str:
    if mode == "mask_after_softmax" and cfg.causal:
        return "softmax over every position, then future weights set to 0 (failure mode mask_after_softmax)"
    if not cfg.causal:
        return "none: every query sees every key"
    return (
        "causal, aligned bottom-right (for a square score matrix the same as top-left): query i sees keys "
        "j <= i; a query block shorter than its keys, as in decoding, sees every cached position up to its "
        "own; future scores set to -inf before the softmax"
    )
