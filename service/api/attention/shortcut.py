"""What "verified" proves, and the shortcut it cannot rule out, made visible.

A solved challenge proves that whoever held its link sent the correct numbers for fresh random
cases within the time allowed. It cannot prove that the learner's own code made them: the API
computes the same numbers for anyone who posts the cases to `POST /api/v1/attention`. That
shortcut is recorded instead of hidden: each case of an open challenge is remembered by a
fingerprint (in a store every worker shares when the rate limits' store is Redis, else in this
worker), a trace of exactly that case marks it seen, and a solution whose cases were seen says so in
its verdict and in the completion event's data (`engine_seen: true`), for instructors and analytics.
"""

from __future__ import annotations

import hashlib
import logging
import time
from typing import Any

import numpy as np
from flask import current_app
from limits.storage import MemoryStorage, storage_from_string

from ...exercise.challenge import SHAPES

log = logging.getLogger(__name__)
PREFIX = "workbench-shortcut"
# Only the shapes challenges make are looked up.
MAX_N, WIDTHS = 6, {d for d, _ in SHAPES}


class Marks:
    """Keys remembered for a while, in the shared store when it answers, else in this worker."""

    def __init__(self, uri: str):
        self.shared: Any = storage_from_string(uri)
        self.local = MemoryStorage()

    def mark(self, key: str, seconds: int) -> None:
        try:
            self.shared.incr(f"{PREFIX}/{key}", seconds)
        except Exception:  # the store's errors, whatever its client: remembered in this worker only
            log.warning("the shared store did not answer: a challenge case is remembered in this worker only")
            self.local.incr(f"{PREFIX}/{key}", seconds)

    def marked(self, key: str) -> bool:
        try:
            return bool(self.shared.get(f"{PREFIX}/{key}")) or bool(self.local.get(f"{PREFIX}/{key}"))
        except Exception:  # the store's errors: what this worker remembers
            return bool(self.local.get(f"{PREFIX}/{key}"))


def marks() -> Marks:
    found = current_app.extensions.get("challenge_marks")
    if found is None:
        found = current_app.extensions["challenge_marks"] = Marks(
            current_app.extensions["settings"].ratelimit_storage_uri
        )
    return found


def fingerprint(tokens: Any, heads: int, causal: bool, w_o: Any = None) -> str:
    """The same case, however its numbers were written (rounded as the challenge writes them)."""
    parts = [np.round(np.asarray(tokens, dtype=float), 6).tobytes(), str(heads).encode(), b"c" if causal else b"n"]
    if w_o is not None:
        parts.append(np.round(np.asarray(w_o, dtype=float), 6).tobytes())
    return hashlib.blake2b(b"|".join(parts), digest_size=16).hexdigest()


def note(args: dict[str, Any]) -> None:
    """A trace the API computes: when it is exactly an open challenge's case, mark the case seen."""
    tokens = args["tokens"]
    if not (len(tokens) <= MAX_N and len(tokens[0]) in WIDTHS) or args.get("failure_mode") or args.get("rope"):
        return
    projections = args.get("projections") or {}
    if any(projections.get(p) is not None for p in ("query", "key", "value")) or args.get("kv_heads"):
        return
    if args.get("latent") or args.get("window") or args.get("sink_logit"):
        return
    store = marks()
    if not any(store.marked(key) for key in _open_keys()):  # no challenge open: nothing to fingerprint
        return
    key = fingerprint(tokens, args["heads"], args.get("causal", True), projections.get("output"))
    if store.marked(f"case/{key}"):
        store.mark(f"seen/{key}", current_app.extensions["settings"].challenge_ttl_seconds)


def remember(cases: list[dict[str, Any]], seconds: int) -> None:
    """An open challenge's cases, for `seconds` (its lifetime)."""
    store = marks()
    store.mark(_open_keys()[0], 2 * seconds)  # kept past the end of the next window
    for case in cases:
        store.mark(f"case/{_of(case)}", seconds)


def seen(cases: list[dict[str, Any]]) -> bool:
    """Whether any of these cases was computed by the API while the challenge was open."""
    store = marks()
    return any(store.marked(f"seen/{_of(case)}") for case in cases)


def _open_keys() -> tuple[str, str]:
    """A challenge opened in this window of its lifetime's length, or the one before, may still be
    open. Marked per window, for two lifetimes from its first mark: a mark keeps the expiry of its
    first count, so one key for every challenge would lapse with the first."""
    ttl = current_app.extensions["settings"].challenge_ttl_seconds
    window = int(time.time() // ttl)
    return f"open/{window}", f"open/{window - 1}"


def _of(case: dict[str, Any]) -> str:
    """An online-softmax case (no `heads`) is one head's plain pass: the same numbers, the same fingerprint."""
    return fingerprint(case["tokens"], case.get("heads", 1), case["causal"], case.get("output_projection"))
