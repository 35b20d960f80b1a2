"""Ready request bodies, each for the endpoint it names (`endpoint`): the workbench, the lesson's split and
four heads for `POST /api/v1/attention`, the KV cache page's case for `POST /api/v1/attention/decode`, the
online softmax page's for `POST /api/v1/attention/tiled`.

`four-heads` is built, not tuned by hand: learned-looking small random projections (seeded,
two decimals) plus one deliberate circuit per head, so each head's pattern has a reason a
reader can see in the matrices: recency, first-token bias, diffuse, bimodal.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

WORKBENCH_TOKENS = [
    [1.0, 0.5, -0.5, 1.0],
    [0.2, 1.0, 1.5, -0.3],
    [-1.0, 0.3, 0.8, 0.6],
]


def _four_heads() -> dict[str, Any]:
    n, d_model = 6, 8  # 4 heads of width 2
    rng = np.random.default_rng(11)
    x = np.zeros((n, d_model))
    x[:, 0] = 1.0  # constant feature
    x[:, 1] = np.arange(n) / (n - 1)  # position ramp 0 .. 1
    x[0, 2] = 1.0  # "first token" flag
    x[:, 3:] = np.round(rng.normal(size=(n, 5)) * 0.5, 2)  # content
    w_q = np.round(rng.normal(size=(d_model, d_model)) * 0.05, 2)
    w_k = np.round(rng.normal(size=(d_model, d_model)) * 0.05, 2)
    # Head 0, recency: a constant query against keys that grow with position.
    w_q[0, 0] += 2.0
    w_k[1, 0] += 6.0
    # Head 1, first-token bias: a constant query against the first-token flag.
    w_q[0, 2] += 2.5
    w_k[2, 2] += 5.0
    # Head 2, diffuse: queries near zero, so every visible key scores about the same.
    w_q[:, 4:6] = np.round(w_q[:, 4:6] * 0.2, 3)
    # Head 3, bimodal: the first-token flag and the position ramp, equally strong.
    w_q[0, 6] += 2.0
    w_k[2, 6] += 7.0
    w_k[1, 6] += 7.0
    w_v = np.round(rng.normal(size=(d_model, d_model)) * 0.5, 2)
    w_o = np.round(rng.normal(size=(d_model, d_model)) * 0.35, 2)
    return {
        "tokens": np.round(x, 3).tolist(),
        "heads": 4,
        "causal": True,
        "projections": {
            "query": np.round(w_q, 3).tolist(),
            "key": np.round(w_k, 3).tolist(),
            "value": w_v.tolist(),
            "output": w_o.tolist(),
        },
    }


def _workbench_learned() -> dict[str, Any]:
    """Learned-looking projections for the workbench's tokens: every output feature mixes every
    input coordinate (seeded, two decimals), and W_O mixes the two heads' features."""
    rng = np.random.default_rng(7)
    mixed = {
        name: (np.round(0.6 * np.eye(4) + rng.normal(size=(4, 4)) * 0.45, 2) + 0.0).tolist()
        for name in ("query", "key", "value", "output")
    }
    return {"tokens": WORKBENCH_TOKENS, "heads": 2, "causal": True, "projections": mixed}


def _kv_cache() -> dict[str, Any]:
    """The KV cache page's case: six 8-d tokens, four query heads of width 2, RoPE; and a latent of
    width 4 with a decoupled RoPE part of width 2 for multi-head latent attention (seeded, two
    decimals: learned-looking, not tuned). Its cache keeps 4 + 2 = 6 numbers a token, against 16 for
    the same heads with keys and values of their own."""
    rng = np.random.default_rng(12)
    d_model, heads, d_c, d_rope = 8, 4, 4, 2
    x = np.round(rng.normal(size=(6, d_model)) * 0.8, 2)
    latent = {
        "down": np.round(rng.normal(size=(d_model, d_c)) * 0.6, 2),
        "up_key": np.round(rng.normal(size=(d_c, d_model)) * 0.7, 2),
        "up_value": np.round(rng.normal(size=(d_c, d_model)) * 0.7, 2),
        "rope_key": np.round(rng.normal(size=(d_model, d_rope)) * 0.6, 2),
        "rope_query": np.round(rng.normal(size=(d_model, heads * d_rope)) * 0.6, 2),
    }
    return {
        "tokens": (x + 0.0).tolist(),
        "heads": heads,
        "causal": True,
        "rope": {"style": "half", "base": 10000.0},
        "latent": {name: (w + 0.0).tolist() for name, w in latent.items()},
    }


def _online_softmax() -> dict[str, Any]:
    """The online softmax page's case: eight 4-d tokens (seeded, one decimal, spread so that a row's
    maximum often rises from one key block to the next), two heads of width 2, causal."""
    x = np.round(np.random.default_rng(51).normal(size=(8, 4)) * 1.6, 1) + 0.0
    return {"tokens": x.tolist(), "heads": 2, "causal": True, "block_q": 2, "block_k": 2}


def _rope_scaling() -> dict[str, Any]:
    """The RoPE scaling page's case: six 8-d tokens (seeded, one decimal), one head of width 8 (four RoPE
    pairs, base 100), as a model trained on 32 positions and read at four times that with YaRN, the six
    tokens at positions 96 to 101."""
    x = np.round(np.random.default_rng(62).normal(size=(6, 8)), 1) + 0.0
    scaling = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32}
    rope = {"style": "half", "base": 100.0, "scaling": scaling, "offset": 96}
    return {"tokens": x.tolist(), "heads": 1, "causal": True, "rope": rope}


ATTENTION = "POST /api/v1/attention"
ENDPOINTS = {"kv-cache": f"{ATTENTION}/decode", "online-softmax": f"{ATTENTION}/tiled"}


@lru_cache(maxsize=1)
def presets() -> dict[str, dict[str, Any]]:
    """Each case under its id, with the endpoint it is a body for (`ATTENTION` unless `ENDPOINTS` says)."""
    return {name: {"id": name, "endpoint": ENDPOINTS.get(name, ATTENTION), **case} for name, case in _cases().items()}


def _cases() -> dict[str, dict[str, Any]]:
    return {
        "workbench": {
            "title": "Two-head causal attention workbench",
            "description": "Three 4-d tokens, two heads of width 2, identity projections, causal mask: "
            "head 1 reads coordinates 0-1 and head 2 reads coordinates 2-3.",
            "request": {"tokens": WORKBENCH_TOKENS, "heads": 2, "causal": True},
        },
        "workbench-learned": {
            "title": "The workbench with learned-looking projections",
            "description": "The workbench's tokens with W_Q, W_K and W_V that mix every coordinate into every "
            "projected feature (so each head reads all four inputs, as in a trained model), and a W_O that "
            "mixes the two heads' features.",
            "request": _workbench_learned(),
        },
        "seed-split": {
            "title": "The lesson's split of [1, 2, 10, 20]",
            "description": "One projected token split into two contiguous heads: [1, 2] and [10, 20]; "
            "concatenation restores [1, 2, 10, 20].",
            "request": {"tokens": [[1.0, 2.0, 10.0, 20.0]], "heads": 2, "causal": True},
        },
        "four-heads": {
            "title": "Four heads over six positions",
            "description": "Projections that give four distinct patterns: head 0 recency (latest "
            "position), head 1 first-token bias, head 2 diffuse, head 3 bimodal (first and latest).",
            "patterns": ["recency", "first-token", "diffuse", "bimodal"],
            "request": _four_heads(),
        },
        "kv-cache": {
            "title": "A decode with a KV cache, shared or compressed",
            "description": "Six 8-d tokens, four query heads of width 2 with RoPE, for POST /attention/decode: as "
            "they are (MHA), with kv_heads 2 (GQA) or 1 (MQA), or with the latent weights given (MLA: a 4-wide "
            "latent and a 2-wide decoupled RoPE key per token).",
            "request": _kv_cache(),
        },
        "online-softmax": {
            "title": "The online softmax, tile by tile",
            "description": "Eight 4-d tokens, two heads of width 2, causal, for POST /attention/tiled: 2 x 2 tiles "
            "give 10 computed (4 on the diagonal, masked inside) and 6 skipped.",
            "request": _online_softmax(),
        },
        "rope-scaling": {
            "title": "RoPE past the training length",
            "description": "Six 8-d tokens, one head of width 8 (four RoPE pairs, base 100), as a model trained on 32 "
            "positions and read at four times that with YaRN: the tokens at positions 96 to 101.",
            "request": _rope_scaling(),
        },
    }
