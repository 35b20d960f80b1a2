"""Rate limits and compute budgets, counted once per request at the edge, with `limits` (moving
windows) in a store every worker shares when one is configured (Redis), else in this worker.

- Requests: every /api/v1 and /lti request counts against its caller's limit (per key, per
  browser learner, per address: caller.py), and against any limit its route adds
  (`rate_limit(...)` on a view or a fast handler). Over one: 429 with Retry-After.
- Compute: a route declares what a request costs in cells (`@costs`: the attention resource counts
  its score tensor plus its activations, which its time and the size of its answer grow with, and
  refuses one over its caps with a 413 itself). Under `compute_free_cells` it is never charged; above, it
  is charged before anything is computed to its client, against `compute_budget_client` cells
  in the shared store (429 over it), for browser sessions and anonymous callers to their
  address as well, against `compute_budget_address` (sessions are free to make: minting more
  buys no compute), and to this worker, against `compute_budget_worker` cells
  in memory (503 over it), shared fairly between network blocks (`FairShare`): many clients
  each within budget still cannot take the whole worker, nor one network another's share.
  Every budget is tested before any is charged, and a request refused after it was charged (a
  503: no slot came free) is refunded, so refused requests spend no one's budget.

The shared store down must not take the API down: limits continue in this worker's memory, a
warning is logged and counted (workbench_ratelimit_storage_trouble_total) and /readyz says so.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from limits import RateLimitItem, parse
from limits.storage import MemoryStorage, storage_from_string
from limits.strategies import FixedWindowRateLimiter, MovingWindowRateLimiter

from ..observability import RATELIMIT_STORAGE_TROUBLE
from ..server import penalties
from ..text import N_
from .caller import Caller
from .problems import Problem

log = logging.getLogger(__name__)
PREFIX = "workbench"


def rate_limit(*limits: str) -> Callable:
    """Add request limits to a view (or a fast handler): `@rate_limit("10/hour")`. Counted at the
    edge, per caller, beside the caller's own limit; both paths of a route obey them."""

    def decorator(func: Callable) -> Callable:
        func.edge_limits = (*getattr(func, "edge_limits", ()), *limits)  # type: ignore[attr-defined]
        return func

    return decorator


class Limits:
    """One per app: request limits and the client budget in the shared store, the worker budget
    in memory; the memory store also stands in while the shared one does not answer."""

    def __init__(self, settings: Any):
        self.enabled = settings.ratelimit_enabled
        self.storage = storage_from_string(settings.ratelimit_storage_uri)
        self.shared_requests = MovingWindowRateLimiter(self.storage)
        self.local = MemoryStorage()
        self.local_requests = MovingWindowRateLimiter(self.local)
        self.free = settings.compute_free_cells
        self.client: RateLimitItem = parse(settings.compute_budget_client)
        self.address: RateLimitItem = parse(settings.compute_budget_address)
        self.worker: RateLimitItem = parse(settings.compute_budget_worker)
        self.fair = FairShare(self.worker)
        self.shared_cells = FixedWindowRateLimiter(self.storage)
        self.local_cells = FixedWindowRateLimiter(self.local)
        self._items: dict[str, RateLimitItem] = {}
        self._lock = threading.Lock()

    def item(self, text: str) -> RateLimitItem:
        found = self._items.get(text)
        if found is None:
            found = self._items[text] = parse(text)
        return found

    def hit(self, caller: Caller, route: str, extra: tuple[str, ...] = ()) -> list[tuple[str, str]]:
        """Count one request against the caller's limit and the route's; its X-RateLimit headers
        (of the limit nearest its end), or a 429 problem."""
        if not self.enabled:
            return []
        nearest: tuple[int, RateLimitItem, float] | None = None
        for text, scope in ((caller.limit, "global"), *((limit, route) for limit in extra)):
            item = self.item(text)
            allowed, remaining, reset = self._count(
                self.shared_requests, self.local_requests, item, caller.rate_key, scope
            )
            if not allowed:
                refused = Problem(
                    429,
                    N_("too many requests: the limit is %(limit)s; try again in %(seconds)s s")
                    if scope == "global"
                    else N_("too many requests: the limit is %(limit)s on this route; try again in %(seconds)s s"),
                    args={"limit": str(item), "seconds": _seconds(reset)},
                    headers={"Retry-After": _seconds(reset), **_headers(item, 0, reset)},
                    slug="rate-limited",
                )
                if scope == "global" and caller.anonymous:  # the main loop repeats it: service/server/penalties.py
                    penalties.remember(caller.rate_key, reset - time.time(), 429, refused.detail)
                raise refused
            if nearest is None or remaining < nearest[0]:
                nearest = (remaining, item, reset)
        assert nearest is not None
        return list(_headers(nearest[1], nearest[0], nearest[2]).items())

    def hit_once(self, key: str, scope: str, text: str, refusal: str) -> None:
        """Count one against the limit `text` of (`key`, `scope`) alone; over it, 429 saying `refusal`."""
        if not self.enabled:
            return
        item = self.item(text)
        allowed, _, reset = self._count(self.shared_requests, self.local_requests, item, key, scope)
        if not allowed:
            raise Problem(
                429,
                f"{refusal} (the limit is {item}); try again in {_seconds(reset)} s",
                headers={"Retry-After": _seconds(reset)},
                slug="rate-limited",
            )

    def _count(self, shared, local, item: RateLimitItem, *identifiers: str, cost: int = 1) -> tuple[bool, int, float]:
        try:
            return self._hit(shared, item, identifiers, cost)
        except Exception:  # the store's errors, whatever its client library: limits fail over, not open
            RATELIMIT_STORAGE_TROUBLE.inc()
            log.warning("rate limit store unreachable: limits counted in this worker only")
            return self._hit(local, item, identifiers, cost)

    @staticmethod
    def _hit(strategy, item: RateLimitItem, identifiers: tuple[str, ...], cost: int) -> tuple[bool, int, float]:
        allowed = strategy.hit(item, PREFIX, *identifiers, cost=cost)
        stats = strategy.get_window_stats(item, PREFIX, *identifiers)
        return allowed, stats.remaining, stats.reset_time

    def charge(self, caller: Caller, cells: int) -> Receipt | None:
        """Charge a request's cells to its client (and address) and to this worker, or refuse it
        (429, 503) having charged nothing: every budget is tested before any is charged. The
        receipt refunds the charge when the request is refused after all (`refund`: a 5xx)."""
        if not self.enabled or cells < self.free:
            return None
        budgets: list[tuple[RateLimitItem, tuple[str, ...]]] = []
        if caller.address and not caller.rate_key.startswith("key:"):
            # Browser sessions cost nothing to make: every one from an address shares its budget
            # too, so minting sessions buys no compute (a platform's key is charged on its own).
            budgets.append((self.address, ("compute", caller.address)))
        budgets.append((self.client, ("compute", caller.rate_key)))
        for item, identifiers in budgets:
            allowed, reset = self._test(item, identifiers, cells)
            if not allowed:
                raise _spent(item, cells, reset, by_address=item is self.address and len(budgets) == 2)
        group = share_group(caller)
        with self._lock:  # test-and-take as one step among this worker's threads
            window = self.fair.take(group, cells, time.time())
        for item, identifiers in budgets:
            self._count(self.shared_cells, self.local_cells, item, *identifiers, cost=cells)
        return Receipt(cells, tuple(budgets), group, window)

    def refuse_early(self, caller: Caller) -> None:
        """Before a body of EARLY_BYTES or more is read: a network whose fair share of this worker is
        spent gets its 503 at once, with nothing parsed (the workbench's requests, a few hundred
        bytes and free, still go through and are never charged)."""
        if not self.enabled:
            return
        group = share_group(caller)
        with self._lock:
            refused = self.fair.refusal(group, self.free, time.time())
        if refused is not None:
            if group.startswith("block:"):  # the main loop repeats it for large bodies: penalties.py
                penalties.remember(group, int(refused.headers["Retry-After"]), 503, refused.detail)
            raise refused

    def refund(self, receipt: Receipt) -> None:
        """Give back what a request was charged when it was refused after all (a 503: no slot came
        free, the database did not answer): refused work spends no one's budget."""
        for item, identifiers in receipt.budgets:
            self._count(self.shared_cells, self.local_cells, item, *identifiers, cost=-receipt.cells)
        with self._lock:
            self.fair.give_back(receipt.group, receipt.cells, receipt.window)

    def _test(self, item: RateLimitItem, identifiers: tuple[str, ...], cells: int) -> tuple[bool, float]:
        for strategy in (self.shared_cells, self.local_cells):
            try:
                allowed = strategy.test(item, PREFIX, *identifiers, cost=cells)
                return allowed, strategy.get_window_stats(item, PREFIX, *identifiers).reset_time
            except Exception:  # as _count: the shared store down, this worker's memory stands in
                RATELIMIT_STORAGE_TROUBLE.inc()
                log.warning("rate limit store unreachable: limits counted in this worker only")
        raise AssertionError("the memory store does not fail")

    def storage_ok(self) -> bool:
        """Whether the shared store answers (always true for the in-memory store)."""
        try:
            return bool(self.storage.check())
        except Exception:  # any client error means it does not answer; /readyz reports it
            return False


@dataclass(frozen=True)
class Receipt:
    """What one request was charged: its cells, to which shared budgets, to which share group of
    this worker, in which of its windows."""

    cells: int
    budgets: tuple[tuple[RateLimitItem, tuple[str, ...]], ...]
    group: str
    window: int


def share_group(caller: Caller) -> str:
    """Who shares one fair share of a worker: a platform's key alone; anyone else by their network
    block (/24 of IPv4, /48 of IPv6), so many addresses of one network, or many sessions of one
    address, take one share between them."""
    if caller.rate_key.startswith("key:") or not caller.address:
        return caller.rate_key
    return penalties.block_of(caller.address.removeprefix("address:"))


class FairShare:
    """This worker's compute budget, `amount` cells per fixed window, shared fairly: the first half
    of a window goes to whoever asks; past it, a group (`share_group`) is served only within its
    fair share: the budget over the groups that used it this window, plus one for a group yet to
    come. One group's flood then takes at most half the worker, n flooding groups n/(n+1) of it,
    and a learner arriving later still finds a share of their own."""

    def __init__(self, item: RateLimitItem):
        self.item, self.amount, self.seconds = item, item.amount, item.get_expiry()
        self.window, self.total = -1, 0
        self.used: dict[str, int] = {}

    def take(self, group: str, cells: int, now: float) -> int:
        """Take `cells` for `group` (the window it was taken in), or raise the 503 that says why."""
        refused = self.refusal(group, cells, now)
        if refused is not None:
            raise refused
        self.used[group] = self.used.get(group, 0) + cells
        self.total += cells
        return self.window

    def refusal(self, group: str, cells: int, now: float) -> Problem | None:
        """The 503 taking `cells` for `group` now would get; None when they fit."""
        window = int(now // self.seconds)
        if window != self.window:
            self.window, self.total, self.used = window, 0, {}  # a new window: everyone starts again
        share = self.amount / (len(self.used.keys() | {group}) + 1)
        over_all = self.total + cells > self.amount
        over_share = self.total + cells > self.amount / 2 and self.used.get(group, 0) + cells > share
        if not (over_all or over_share):
            return None
        return Problem(
            503,
            N_("this server is computing as much as it allows (%(budget)s cells); try again shortly")
            if over_all
            else N_("this server is busy and your network's fair share of it is spent; try again shortly"),
            args={"budget": str(self.item)} if over_all else None,
            headers={"Retry-After": str(max(1, math.ceil((window + 1) * self.seconds - now)))},
            slug="busy",
        )

    def give_back(self, group: str, cells: int, window: int) -> None:
        if window == self.window and group in self.used:
            self.used[group] = max(0, self.used[group] - cells)
            self.total = max(0, self.total - cells)


SPENT = {
    True: N_(
        "this request costs %(cells)s cells and the compute budget of your network address "
        "(%(budget)s cells, shared by its browser sessions) is spent; it refills when the window ends"
    ),
    False: N_(
        "this request costs %(cells)s cells and your compute budget of %(budget)s cells is spent; "
        "it refills when the window ends"
    ),
}


def _spent(item: RateLimitItem, cells: int, reset: float, by_address: bool) -> Problem:
    return Problem(
        429,
        SPENT[by_address],
        args={"cells": f"{cells:,}", "budget": str(item)},
        headers={"Retry-After": _seconds(reset)},
        slug="compute-budget",
    )


def _headers(item: RateLimitItem, remaining: int, reset: float) -> dict[str, str]:
    return {
        "X-RateLimit-Limit": str(item.amount),
        "X-RateLimit-Remaining": str(max(0, remaining)),
        "X-RateLimit-Reset": str(int(reset + 1)),
    }


def _seconds(reset: float) -> str:
    return str(max(1, math.ceil(reset - time.time())))
