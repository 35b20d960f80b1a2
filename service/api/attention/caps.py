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
    projections = raw.get("projections")
    if isinstance(projections, dict):
        for name, matrix in projections.items():
            rows = _len(matrix)
            cols = _len(matrix[0]) if rows else None
            for size in (rows, cols):
                if size is not None and size > settings.max_d_model:
                    over.append((f"projections.{name}", "max_d_model", size, settings.max_d_model))
                    break
    return over


def _refuse(over: list[tuple[str, str, int, int]]) -> None:
    what = {
        "max_tokens": "n (tokens)",
        "max_d_model": "d_model (numbers per row)",
        "max_heads": "heads",
        "max_score_cells": "heads * n * n (the score tensor)",
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


def cost(tokens: list, heads: int, compare: bool = False) -> int:
    """What an attention request costs, in cells: the score tensor (heads x n x n) plus the
    activations (n x d_model); a comparison is two traces."""
    n, d_model = len(tokens), len(tokens[0])
    return (heads * n * n + n * d_model) * (2 if compare else 1)
