"""Heads in parallel: one thread per core, each running whole heads with BLAS on one thread.

numpy's ufuncs (exp, max, sum) run on one core and OpenBLAS splits each small per-head matmul
over every core, its threads spinning between calls: on 2 cores a large trace used one core
for half its time. Giving each thread whole heads, with BLAS told to use one thread
meanwhile, keeps both cores busy and each head's [n, n] block in that core's cache. Small
problems stay serial (a thread hand-off costs more than they do). Results are bit-for-bit those
of one thread going head after head with one BLAS thread (every head is computed by the same
operations in the same order); OpenBLAS on more threads rounds its matmuls differently, by an ulp.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

# Below this many score cells ([H, n, n]) one thread is faster than handing heads out.
PARALLEL_CELLS = 1 << 18

_state = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_blas: list | None = None  # threadpoolctl controllers of the loaded BLAS libraries
_inside = 0  # engine calls currently in a parallel section of this process
_saved: list[int] = []


_limit: int | None = None  # set in the background compute processes (service/api/attention/offload.py)


def cores() -> int:
    """The threads one computation may use: this process's CPUs, or less where limited."""
    available = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return available if _limit is None else max(1, min(_limit, available))


def limit_threads(threads: int) -> None:
    """At most `threads` threads per computation in this process from now on (1: serial)."""
    global _limit
    _limit = threads


def over_heads(fn: Callable[[slice], None], heads: int, cells: int) -> None:
    """`fn(heads_slice)` over contiguous groups of heads covering [0, heads), in parallel when worth it."""
    workers = min(cores(), heads)
    if workers < 2 or cells < PARALLEL_CELLS:
        fn(slice(0, heads))
        return
    bounds = [heads * i // workers for i in range(workers + 1)]
    groups = [slice(a, b) for a, b in zip(bounds, bounds[1:], strict=False)]
    pool = _enter(workers)
    try:
        futures = [pool.submit(fn, group) for group in groups[1:]]
        fn(groups[0])  # this thread takes the first group itself
        for future in futures:
            future.result()  # re-raises a head's error here
    finally:
        _leave()


def _enter(workers: int) -> ThreadPoolExecutor:
    """The pool, with BLAS on one thread until the last concurrent section leaves."""
    global _pool, _blas, _inside
    with _state:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=workers - 1, thread_name_prefix="heads")
        if _blas is None:
            _blas = _blas_controllers()
        if _inside == 0:
            _saved[:] = [lib.num_threads for lib in _blas]
            for lib in _blas:
                lib.set_num_threads(1)
        _inside += 1
        return _pool


def _leave() -> None:
    global _inside
    with _state:
        _inside -= 1
        if _inside == 0:
            for lib, threads in zip(_blas or [], _saved, strict=False):
                lib.set_num_threads(threads)


def _blas_controllers() -> list:
    """The loaded BLAS libraries' thread controls; none without threadpoolctl (an optional
    speed-up: the heads still run in parallel, BLAS keeps its own threads meanwhile)."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return []
    return list(ThreadpoolController().select(user_api="blas").lib_controllers)


def _after_fork_in_child() -> None:
    """Threads do not survive fork: a forked worker makes its own pool on first use."""
    global _state, _pool, _inside
    _state, _pool, _inside = threading.Lock(), None, 0


os.register_at_fork(after_in_child=_after_fork_in_child)
