"""Compute budgets: what one client, and one worker, may spend on attention per window.

A request's cost is counted in cells (`cost`: the score tensor plus the activations), which is
what both its compute time and the size of its answer grow with (about 100 bytes of JSON a
cell). Requests under `compute_free_cells` (the workbench's own cost a few dozen cells) are
never charged: a learner's edits are bounded by the request rate limit alone. Above it, each
request is charged, before anything is computed,

- to its client (`auth.rate_key`: the verified key, the signed session, else the address),
  against `compute_budget_client` cells, counted in the rate limiter's store, so every worker
  and instance shares it; over it: 429;
- to this worker, against `compute_budget_worker` cells, counted in memory: many clients each
  within their budget still cannot take the whole worker; over it: 503.

Both answers carry Retry-After: the seconds until the window that refused has room. When the
shared store is unreachable, the client budget is counted per worker in memory, like the
request limits (auth.init_limiter), and the trouble counter says so.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from typing import Any

from flask import Flask, current_app
from limits import RateLimitItem, parse
from limits.storage import MemoryStorage
from limits.strategies import FixedWindowRateLimiter

from ..observability import RATELIMIT_STORAGE_TROUBLE
from .auth import rate_key
from .problems import Problem

log = logging.getLogger(__name__)


def cost(args: dict[str, Any], compare: bool = False) -> int:
    """What a request costs, in cells: the score tensor (heads x n x n) plus the activations
    (n x d_model), which dominate when d_model is large and n is not; a comparison is two traces."""
    tokens = args["tokens"]
    n, d_model = len(tokens), len(tokens[0])
    return (args["heads"] * n * n + n * d_model) * (2 if compare else 1)


class Budgets:
    """One per app: the client budget in the shared store, the worker budget in memory."""

    def __init__(self, app: Flask):
        settings = app.extensions["settings"]
        self.free = settings.compute_free_cells
        self.client: RateLimitItem = parse(settings.compute_budget_client)
        self.worker: RateLimitItem = parse(settings.compute_budget_worker)
        self.shared = FixedWindowRateLimiter(app.extensions["limiter"].storage)
        self.local = FixedWindowRateLimiter(MemoryStorage())  # the worker's budget, and the client's fallback
        self._lock = threading.Lock()

    def charge(self, cells: int) -> None:
        if cells < self.free:
            return
        who = rate_key()
        allowed, limiter = self._hit_client(who, cells)
        if not allowed:
            raise Problem(
                429,
                f"this request costs {cells:,} cells and your compute budget of {self.client} cells is spent; "
                "it refills when the window ends",
                headers={"Retry-After": self._retry_after(limiter, self.client, "compute", who)},
                slug="compute-budget",
            )
        with self._lock:  # test-and-hit as one step among this worker's threads
            if not self.local.hit(self.worker, "compute", "worker", cost=cells):
                raise Problem(
                    503,
                    f"this server is computing as much as it allows ({self.worker} cells); try again shortly",
                    headers={"Retry-After": self._retry_after(self.local, self.worker, "compute", "worker")},
                    slug="busy",
                )

    def _hit_client(self, who: str, cells: int) -> tuple[bool, FixedWindowRateLimiter]:
        """Charge the client in the shared store if it answers, else in this worker's memory
        (counted and logged); returns whether it was allowed, and where it was counted."""
        try:
            return self.shared.hit(self.client, "compute", who, cost=cells), self.shared
        except Exception:  # redis' errors, whatever the client library: the budget fails over, not open
            RATELIMIT_STORAGE_TROUBLE.inc()
            log.warning("rate limit store unreachable: compute budgets counted in this worker only")
            return self.local.hit(self.client, "compute", who, cost=cells), self.local

    @staticmethod
    def _retry_after(limiter: FixedWindowRateLimiter, item: RateLimitItem, *identifiers: str) -> str:
        try:
            reset = limiter.get_window_stats(item, *identifiers).reset_time
        except Exception:  # the store went away between the hit and now
            reset = time.time() + item.get_expiry()
        return str(max(1, math.ceil(reset - time.time())))


def charge(cells: int) -> None:
    """Charge this request's cost to its client and to this worker, or refuse it (429, 503)."""
    budgets = current_app.extensions.get("budgets")
    if budgets is not None:
        budgets.charge(cells)


def init_app(app: Flask) -> None:
    """After the limiter (its store is shared); nothing is charged while limits are off."""
    if app.extensions["settings"].ratelimit_enabled:
        app.extensions["budgets"] = Budgets(app)
