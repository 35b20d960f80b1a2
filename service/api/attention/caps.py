"""The attention resource's caps and cost: a request over a cap (max_tokens, max_d_model, max_heads,
max_score_cells) is a 413 naming it, read on the raw JSON before any element is validated or any
array made (the edge's `@costs` measure and the schemas' first step); under them a request costs
cells, what the edge charges to the compute budgets (service/edge/limits.py)."""

from __future__ import annotations

from typing import Any

from ...edge.problems import Problem


def _len(value: Any) -> int | None:
    return len(value) if isinstance(value, list) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def refuse_over_caps(raw: Any, settings: Any) -> None:
    """413 naming the cap when n, d_model, heads or heads*n*n exceed the configured limits."""
    over = caps_exceeded(raw, settings)
    if over:
        _refuse(over)


def caps_exceeded(raw: Any, settings: Any) -> list[tuple[str, str, int, int]]:
    """(field, cap, value, limit) for every cap the raw JSON body exceeds; [] within them all.
    Read on the raw JSON, before any element is validated or any array made."""
    if not isinstance(raw, dict):
        return []
    tokens = raw.get("tokens")
    n = _len(tokens)
    d_model = _len(tokens[0]) if n and isinstance(tokens, list) else None
    heads = _int(raw.get("heads"))
    over: list[tuple[str, str, int, int]] = []
    if n is not None and n > settings.max_tokens:
        over.append(("tokens", "max_tokens", n, settings.max_tokens))
    if d_model is not None and d_model > settings.max_d_model:
        over.append(("tokens", "max_d_model", d_model, settings.max_d_model))
    if heads is not None and heads > settings.max_heads:
        over.append(("heads", "max_heads", heads, settings.max_heads))
    if n and heads and heads * n * n > settings.max_score_cells:
        over.append(("heads", "max_score_cells", heads * n * n, settings.max_score_cells))
    for group in ("projections", "latent"):
        matrices = raw.get(group)
        if isinstance(matrices, dict):
            for name, matrix in matrices.items():
                rows = _len(matrix)
                cols = _len(matrix[0]) if rows else None
                for size in (rows, cols):
                    if size is not None and size > settings.max_d_model:
                        over.append((f"{group}.{name}", "max_d_model", size, settings.max_d_model))
                        break
    return over


def decode_cells(raw: Any) -> int | None:
    """The numbers a decode's answer holds (every step's row, and its cache of position + 1 rows),
    from the raw JSON; None when the body is not a decode's shape (the schema says why)."""
    if not isinstance(raw, dict):
        return None
    tokens, heads = raw.get("tokens"), _int(raw.get("heads"))
    n = _len(tokens)
    d_model = _len(tokens[0]) if n and isinstance(tokens, list) else None
    if not (n and d_model and heads) or d_model % heads:
        return None
    kv = _int(raw.get("kv_heads")) or heads
    latent = raw.get("latent")
    if isinstance(latent, dict):
        d_c = _len((latent.get("down") or [[]])[0]) or 0
        key = latent.get("rope_key")
        per_token = d_c + ((_len(key[0]) or 0) if isinstance(key, list) and key else 0)
    else:
        per_token = 2 * kv * (d_model // heads)
    cached = n * (n + 1) // 2  # positions in the cache, summed over the steps
    return cached * (per_token + 2 * heads) + n * 4 * d_model


def refuse_over_decode_cap(raw: Any, settings: Any) -> int | None:
    """413 naming max_decode_cells when a decode's answer would hold more numbers; else its size."""
    cells = decode_cells(raw)
    if cells is not None and cells > settings.max_decode_cells:
        _refuse([("tokens", "max_decode_cells", cells, settings.max_decode_cells)])
    return cells


def tiled_size(raw: Any) -> tuple[int, int] | None:
    """(tiles, numbers) an online softmax's answer holds at most, from the raw JSON: every head's tiles,
    each with its rows' m, alpha, l and O~ (skipped ones counted as computed); None when the body is
    not of that shape (the schema says why)."""
    if not isinstance(raw, dict):
        return None
    tokens, heads = raw.get("tokens"), _int(raw.get("heads"))
    block_q, block_k = _int(raw.get("block_q")), _int(raw.get("block_k"))
    n = _len(tokens)
    d_model = _len(tokens[0]) if n and isinstance(tokens, list) else None
    if not (n and d_model and heads and block_q and block_k) or block_q < 1 or block_k < 1 or d_model % heads:
        return None
    block_q, block_k = min(block_q, n), min(block_k, n)
    tiles = heads * -(-n // block_q) * -(-n // block_k)
    return tiles, tiles * block_q * (3 + d_model // heads)


def refuse_over_tiled_caps(raw: Any, settings: Any) -> tuple[int, int] | None:
    """413 naming max_tiles or max_tiled_cells when an online softmax would take more; else its size."""
    size = tiled_size(raw)
    if size is not None:
        caps = (
            ("block_k", "max_tiles", size[0], settings.max_tiles),
            ("block_k", "max_tiled_cells", size[1], settings.max_tiled_cells),
        )
        over = [cap for cap in caps if cap[2] > cap[3]]
        if over:
            _refuse(over)
    return size


def _refuse(over: list[tuple[str, str, int, int]]) -> None:
    what = {
        "max_tokens": "n (tokens)",
        "max_d_model": "d_model (numbers per row)",
        "max_heads": "heads",
        "max_score_cells": "heads * n * n (the score tensor)",
        "max_decode_cells": "the numbers in the decode's answer (every step's row and its cache)",
        "max_tiles": "the tiles of the online softmax over every head (heads * ceil(n / block_q) * ceil(n / block_k))",
        "max_tiled_cells": "the numbers in the online softmax's answer (each tile's rows' running values)",
    }
    details = [f"{what[cap]} is {value}, over the cap {cap} = {limit}" for _, cap, value, limit in over]
    raise Problem(
        413,
        "the request is larger than this service computes: " + "; ".join(details),
        title="Content Too Large",
        errors={field: [f"{what[cap]} {value} exceeds {cap} = {limit}"] for field, cap, value, limit in over},
        slug="over-limit",
        extra={"limits": {cap: limit for _, cap, _, limit in over}},
    )


def most(settings: Any) -> int:
    """The cells the largest request within the caps costs: what a body too large to parse at the
    edge is charged when its route cannot measure it in the background (a padded body pays as the
    largest one, never nothing)."""
    n, d_model = settings.max_tokens, settings.max_d_model
    return min(settings.max_score_cells, settings.max_heads * n * n) + n * d_model


def cost(tokens: list, heads: int, compare: bool = False) -> int:
    """What an attention request costs, in cells: the score tensor (heads x n x n) plus the
    activations (n x d_model); a comparison is two traces."""
    n, d_model = len(tokens), len(tokens[0])
    return (heads * n * n + n * d_model) * (2 if compare else 1)
