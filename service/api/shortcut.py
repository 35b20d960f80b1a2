"""What "verified" proves, and the shortcut it cannot rule out, made visible.

A solved challenge proves that whoever held its link sent the correct numbers for fresh random
cases within the time allowed. It cannot prove that the learner's own code made them: the API
computes the same numbers for anyone who posts the cases to `POST /api/v1/attention`. That
shortcut is recorded instead of hidden: each case of an open challenge is remembered by a
fingerprint (in the rate limits' store, shared between workers when it is Redis), a trace of
exactly that case marks it seen, and a solution whose cases were seen says so in its verdict
and in the completion event's data (`engine_seen: true`), for instructors and analytics to read.
"""

from __future__ import annotations

from typing import Any

from flask import current_app

from .attention import fingerprint  # a trace marks its case seen there: `note`, on the request path


def remember(cases: list[dict[str, Any]], seconds: int) -> None:
    """An open challenge's cases, for `seconds` (its lifetime)."""
    limits = current_app.extensions["limits"]
    for case in cases:
        limits.mark(f"case/{_of(case)}", seconds)


def seen(cases: list[dict[str, Any]]) -> bool:
    """Whether any of these cases was computed by the API while the challenge was open."""
    limits = current_app.extensions["limits"]
    return any(limits.marked(f"seen/{_of(case)}") for case in cases)


def _of(case: dict[str, Any]) -> str:
    return fingerprint(case["tokens"], case["heads"], case["causal"], case.get("output_projection"))
