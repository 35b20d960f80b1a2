"""Size caps checked on the raw parsed JSON, before any element is validated or array allocated."""

from __future__ import annotations

from typing import Any

from flask import current_app

from .problems import Problem


def _len(value: Any) -> int | None:
    return len(value) if isinstance(value, list) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def check_compute_caps(raw: Any) -> None:
    """413 naming the cap when n, d_model, heads or heads*n*n exceed the configured limits."""
    if not isinstance(raw, dict):
        return
    settings = current_app.extensions["settings"]
    tokens = raw.get("tokens")
    n = _len(tokens)
    d_model = _len(tokens[0]) if n else None
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
    if over:
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
