"""The pipeline: the ten steps (steps.py) in order on every row of X, as a recipe does them. Where
keys and values come from is the variant's (kv.py); which keys each query sees is the mask's
(masks.py); decode.py runs the same steps a block of rows at a time. Every number in and out is
checked finite (steps.py); an error names the input at fault and the first bad cell, counting from 1.

Shapes: n positions, d_model model width, H heads, d_head = d_model / H.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .kv import source_of, traced
from .masks import Masking
from .steps import finite, merge_heads, project


def run(x: np.ndarray, cfg: Any, w: Any, how: Any, features: np.ndarray, kv_features: np.ndarray) -> dict[str, Any]:
    """The ten steps on tokens `x` [n, d_model] (checked finite), as `how` does them."""
    source = source_of(cfg, w, how, features, kv_features)
    heads = source.project(x, None)  # 1-3. queries [H, n, d], what a cache keeps of every row
    masking = Masking.of_pass(cfg.n, cfg.causal, how.mask, cfg.reach.applied(how.reach))  # 5. [n, n]
    done = source.attend(heads.query, heads.cache, scale(cfg, how), masking)  # 4-7.
    plain_k = heads.key_before_rope
    if plain_k is not None:
        plain_k = source.keys_values((plain_k, plain_k))[0]  # each query head's, as its rotated keys
    kept = traced(source.named(heads.cache))  # under latent attention: the latent and the RoPE key
    return {
        "query": heads.query,
        "key": done.key,
        "value": done.value,
        "scores": done.scores,
        "mask": masking.hidden,
        "weights": done.weights,
        "head_outputs": done.outputs,
        **finish(x, done.outputs, w, how),
        "query_before_rope": heads.query_before_rope,
        "key_before_rope": plain_k,
        **kept,
        **done.extra,
    }


def finish(x: np.ndarray, o: np.ndarray, w: Any, how: Any) -> dict[str, np.ndarray]:
    """Steps 8-10 on head outputs `o` [H, m, d_head] of rows `x` [m, d_model]."""
    concat = merge_heads(ORDER[how.order](o))  # 8. [H, m, d_head] -> [m, d_model]
    out = OUTPUT[how.output](concat, w)  # 9. [m, d_model]
    residual = finite(x + out, "the residual X + output", "tokens")  # 10. X + output: [m, d_model]
    return {"concat": concat, "output": out, "residual": residual}


# The order heads are concatenated in (step 8), and whether the output projection is applied (step 9), as a
# recipe says (failure_modes.Recipe.order and .output).
ORDER = {"stable": lambda o: o, "reversed": lambda o: o[::-1]}
OUTPUT = {
    "project": lambda concat, w: (
        concat if w.output is None and w.biases[3] is None else _out(concat, w.output, w.biases[3])
    ),
    "skip": lambda concat, w: concat,
}


def scale(cfg: Any, how: Any) -> float:
    return cfg.scale if how is cfg.recipe else cfg.scale_with(how)  # the checker's mistakes bring their own recipe


def _out(concat: np.ndarray, w_o: np.ndarray | None, b_o: np.ndarray | None = None) -> np.ndarray:
    field = "projections.output" if w_o is not None or b_o is None else "biases.output"
    return finite(
        project(concat, w_o, None, b_o), "the output projection concat @ W_O", field, w_o if b_o is None else True
    )
