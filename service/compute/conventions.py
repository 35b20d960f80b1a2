"""The conventions that applied to one computation, as plain data (see docs/conventions.md)."""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

from .config import AttentionConfig
from .failure_modes import FAILURE_MODES, marked
from .rope import ROPE_STYLES, pairs_table
from .scaling import SCALINGS


@lru_cache(maxsize=256)
def conventions(cfg: AttentionConfig) -> dict[str, Any]:
    """The conventions of `cfg` (one dict per config, shared: read it, do not change it); a step its
    failure mode does otherwise says so, in the words of the step's table below."""
    how, mode = cfg.recipe, cfg.failure_mode
    width = (
        f"sqrt(d_head + d_rope) = sqrt({cfg.d_head + cfg.d_rope})"
        if cfg.d_rope
        else f"sqrt(d_head) = sqrt({cfg.d_head})"
    )
    scale = {
        "d_head": f"scores divided by {width}",
        "none": "scores are not scaled",
        "d_model": f"scores divided by sqrt(d_model) = sqrt({cfg.d_model})",
    }
    return {
        "vectors": "row vectors: Q = X @ W_Q; weights are [in][out]",
        "dtype": "float64",
        "head_split": marked(SPLIT[how.split], how, mode, "split"),
        "scale": marked(scale[how.scale], how, mode, "scale"),
        "scale_value": cfg.scale,
        "mask": marked(MASK[how.mask], how, mode, "mask") if cfg.causal else "none: every query sees every key",
        "masked_scores": "null where masked",
        "fully_masked_rows": "all-zero weights, never NaN (as PyTorch SDPA)",
        "softmax": "per row, numerically stable (the row max subtracted, unless a bound proves every |score| <= 600)",
        "concatenation": marked(ORDER[how.order], how, mode, "order"),
        "output_projection": marked(OUTPUT[how.output], how, mode, "output"),
        "projections_default": "identity",
        "rope": None if cfg.rope is None else rope_block(cfg),
        **cfg.variant.conventions(cfg),  # "grouped_query" and "latent"
        "failure_mode": None if not mode else {"id": mode, "description": FAILURE_MODES[mode]},
        "entropy_unit": f"nats (a uniform row over k keys has entropy ln k; ln {cfg.n} = {math.log(cfg.n):.4f})",
    }


def rope_block(cfg: AttentionConfig) -> dict[str, Any]:
    """RoPE's pairing, base and first position, and with a scaling its every pair (rope.pairs_table) at the
    call's length, as the failure mode (if any) computed them."""
    rope, how = cfg.rope, cfg.recipe
    assert rope is not None
    scaling = None
    if rope.scaling is not None:
        text = SCALINGS[rope.scaling.rope_type]
        scaling = {**rope.scaling.given(), "description": marked(text, how, cfg.failure_mode, "scaling")}
    return {
        "style": rope.style,
        "description": ROPE_STYLES[rope.style],
        "base": rope.base,
        "offset": rope.offset,
        "applied_to": "query and key, after the head split; position = offset + token index",
        "scaling": scaling,
        "frequencies": pairs_table(rope, cfg.d_rope or cfg.d_head, rope.offset + cfg.n, how.scaling),
    }


# Each step's words by how a recipe does it (failure_modes.Recipe); `marked` names the failure mode.
SPLIT = {
    "contiguous": "contiguous: head h owns features [h*d_head, (h+1)*d_head)",
    "first": "every head reads features [0, d_head)",
    "interleaved": "head h reads features h, h+H, h+2H, ...",
}
MASK = {
    "before_softmax": "causal, aligned bottom-right (for a square score matrix the same as top-left): query i sees "
    "keys j <= i; a query block shorter than its keys, as in decoding, sees every cached position up to its own; "
    "future scores set to -inf before the softmax",
    "after_softmax": "softmax over every position, then future weights set to 0",
}
ORDER = {"stable": "head order: [O_0 | O_1 | ...]", "reversed": "reverse head order"}
OUTPUT = {"project": "output = concat @ W_O; residual = tokens + output", "skip": "skipped: output = concat"}
