"""Group commit: requests that arrive while a write is under way are written together, next.

The first request to arrive writes alone (no waiting for company, so an idle service adds no
latency). Requests arriving meanwhile queue; when the write ends, the oldest of them leads the
next write, taking every queued request that fits with it (`fits`). One transaction then carries
several requests, so its fixed costs (the writers' lock, BEGIN and COMMIT, PostgreSQL's function
call and WAL flush) are paid once for all of them.

Each request stays atomic: if a group's write fails, each of its requests is written again on
its own, so one request's conflict or error never reaches another.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


@dataclass(eq=False)
class _Waiting(Generic[T, R]):
    item: T
    done: threading.Event = field(default_factory=threading.Event)
    lead: bool = False  # woken to lead the next write, not with an answer
    result: R | None = None
    error: BaseException | None = None


class GroupCommit(Generic[T, R]):
    """`submit(item)` returns what `write([item, ...])` answered for that item.

    `write(items)` writes the items in one transaction and returns one result per item;
    `fits(group, item)` says whether an item may join a group (one platform, no event id twice).
    """

    def __init__(self, write: Callable[[list[T]], Sequence[R]], fits: Callable[[list[T], T], bool]):
        self._write = write
        self._fits = fits
        self._lock = threading.Lock()
        self._queue: list[_Waiting[T, R]] = []
        self._leading = False

    def submit(self, item: T) -> R:
        me: _Waiting[T, R] = _Waiting(item)
        with self._lock:
            self._queue.append(me)
            lead = not self._leading
            self._leading = True
        while not lead:
            me.done.wait()
            if not me.lead:
                return _answer(me)
            lead, me.lead = True, False
            me.done.clear()
        group = self._take()  # the queue's oldest first: `me`
        try:
            self._write_group(group)
        finally:
            self._pass_the_lead()
        return _answer(me)

    def _take(self) -> list[_Waiting[T, R]]:
        with self._lock:
            group: list[_Waiting[T, R]] = []
            rest: list[_Waiting[T, R]] = []
            for waiting in self._queue:
                if not group or self._fits([w.item for w in group], waiting.item):
                    group.append(waiting)
                else:
                    rest.append(waiting)
            self._queue = rest
        return group

    def _write_group(self, group: list[_Waiting[T, R]]) -> None:
        try:
            try:
                results = self._write([w.item for w in group])
            except Exception as exc:
                if len(group) == 1:
                    group[0].error = exc
                    return
                for waiting in group:  # each alone: one request's failure stays its own
                    try:
                        waiting.result = self._write([waiting.item])[0]
                    except Exception as alone:
                        waiting.error = alone
                return
            for waiting, result in zip(group, results, strict=True):
                waiting.result = result
        finally:
            for waiting in group:
                if waiting.result is None and waiting.error is None:  # interrupted (BaseException)
                    waiting.error = RuntimeError("the write this request was part of was interrupted")
                waiting.done.set()

    def _pass_the_lead(self) -> None:
        with self._lock:
            if self._queue:
                nxt = self._queue[0]
                nxt.lead = True
                nxt.done.set()
            else:
                self._leading = False


def _answer(waiting: _Waiting[T, R]) -> R:
    if waiting.error is not None:
        raise waiting.error
    assert waiting.result is not None
    return waiting.result
