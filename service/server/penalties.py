"""Refusals the server's main loop repeats without a thread (worker.py): once the edge
has refused an anonymous address for its request limit (429), or a network past its fair share of
compute for a large body (503), the same refusal for the same kind of request is answered from
the request's headers alone, until the Retry-After it gave has passed. A flood then costs the
server a header scan per request, not a thread, a parse and a Flask answer.

Only what cannot be wrong is repeated: the 429 only for requests with no credentials at all (no
Authorization, no session cookie: the edge would count them against that address), the 503 only
for bodies of `EARLY_BYTES` or more from that network (the edge refuses those unread)."""

from __future__ import annotations

import threading
import time

from ..identity import block_of

__all__ = ["EARLY_BYTES", "block_of", "refusal_for", "remember"]

EARLY_BYTES = 16384  # bodies this large from a network past its share are refused unread (service/edge/limits.py)
MAX_KEPT = 65536  # remembered refusals; past this the expired go, then the oldest
_lock = threading.Lock()
_until: dict[str, tuple[float, int, str]] = {}  # key -> (until, status, detail)


def remember(key: str, seconds: float, status: int, detail: str) -> None:
    """Repeat this refusal for `key` ("address:<ip>", "block:<network>") for `seconds`."""
    now = time.monotonic()
    with _lock:
        if len(_until) >= MAX_KEPT:
            for k in [k for k, (until, _, _) in _until.items() if until <= now] or list(_until)[: MAX_KEPT // 2]:
                del _until[k]
        _until[key] = (now + seconds, status, detail)


def refusal_for(address: str, anonymous: bool, large: bool) -> tuple[int, int, str] | None:
    """(status, Retry-After seconds, detail) to repeat for a request from `address`, or None."""
    if not _until:
        return None
    now = time.monotonic()
    keys = ([f"address:{address}"] if anonymous else []) + ([block_of(address)] if large else [])
    with _lock:
        for key in keys:
            found = _until.get(key)
            if found is not None and found[0] > now:
                return found[1], max(1, int(found[0] - now + 0.999)), found[2]
    return None
