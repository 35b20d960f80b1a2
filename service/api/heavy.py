"""Large traces are computed away from the request threads, in the background.

A trace above `heavy_compute_cells` score cells is computed and encoded in a separate process
under SCHED_IDLE (service/background.py); its JSON goes to a file in shared memory that
gunicorn sends with sendfile, so the worker's own threads stay free for small requests (event
ingestion above all). At most `heavy_compute_concurrency` of them run at once on the machine,
across every worker (by default one less than the cores, so one core is always left to the
request path). A few requests per worker wait for a slot (each holds a thread); the rest
are shed with 503 + Retry-After. Waiting throttles a client that retries at once on a 503,
which would otherwise cost the request path a parse and a refusal per retry.
"""

from __future__ import annotations

import fcntl
import multiprocessing
import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from typing import Any, NoReturn

from flask import current_app

from ..background import start_compute_process
from ..edge.problems import Problem
from .heavy_child import SHARED, compute_to_file, measure, release_memory_when_idle

SLOTS_DIR = SHARED / f"workbench-heavy-{os.getuid()}"  # one set of slots per machine (container) and user

POLL_SECONDS = 0.02  # how often a waiting request looks for a free slot

_lock = threading.Lock()
_pool: ProcessPoolExecutor | None = None
_pool_pid: int | None = None


def machine_slots(configured: int) -> int:
    """How many large traces may run at once on this machine: 0 means one less than the cores."""
    return configured if configured > 0 else max(1, (os.cpu_count() or 2) - 1)


def compute_threads(slots: int) -> int:
    """Threads one large trace may use: the cores but one (kept for the request path), shared
    by the slots. Two cores: one thread, so ingestion keeps its core under a flood of traces."""
    return max(1, ((os.cpu_count() or 2) - 1) // slots)


@contextmanager
def slot(count: int, wait: float = 0.0) -> Iterator[bool]:
    """Hold one of `count` machine-wide slots, waiting up to `wait` seconds for one to free up.

    A slot is a non-blocking flock on its file; the kernel drops it when the descriptor closes,
    so a killed worker never leaks one.
    """
    SLOTS_DIR.mkdir(mode=0o700, exist_ok=True)
    deadline = time.monotonic() + wait
    while True:
        for index in range(count):
            handle = os.open(SLOTS_DIR / f"slot-{index}", os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(handle)
                continue
            try:
                yield True
            finally:
                os.close(handle)
            return
        if time.monotonic() >= deadline:
            yield False
            return
        time.sleep(POLL_SECONDS)


def _executor(slots: int) -> ProcessPoolExecutor:
    global _pool, _pool_pid
    with _lock:
        broken = _pool is not None and getattr(_pool, "_broken", False)
        if _pool is None or _pool_pid != os.getpid() or broken:  # one pool per gunicorn worker, after the fork
            # spawn, not forkserver: the compute process is then the worker's own child, so the
            # kernel kills it with the worker (die_with_parent); a forkserver outlived its worker.
            context = multiprocessing.get_context("spawn")
            _pool = ProcessPoolExecutor(
                max_workers=slots,
                mp_context=context,
                initializer=start_compute_process,
                initargs=(current_app.extensions["settings"].retain_freed_memory, compute_threads(slots)),
            )
            _pool_pid = os.getpid()
        return _pool


def waiting_room(app) -> threading.BoundedSemaphore:
    """Places for requests of this worker waiting for a slot; each holds a thread, so few."""
    with _lock:
        room = app.extensions.get("heavy_waiting")
        if room is None:
            room = app.extensions["heavy_waiting"] = threading.BoundedSemaphore(
                app.extensions["settings"].heavy_compute_waiting
            )
        return room


def _raise(error: dict[str, Any]) -> NoReturn:
    raise Problem(
        error["status"],
        error["detail"],
        title=error["title"],
        errors=error["errors"],
        slug=error["slug"],
        extra=error["extra"],
    )


@contextmanager
def _waiting_place() -> Iterator[None]:
    settings = current_app.extensions["settings"]
    room = waiting_room(current_app)
    if not room.acquire(blocking=False):
        raise _busy(f"{settings.heavy_compute_waiting} large traces are already waiting here")
    try:
        yield
    finally:
        room.release()


def measure_large_body(raw: bytes, compare: bool) -> int:
    """A body too large to parse in a request thread (it would hold the worker's GIL for tens of
    milliseconds: 30 ms for 1.5 MB) is parsed and validated in the background process; returns
    its cost, or raises the same problem a request thread would. `run(raw=...)` computes it."""
    settings = current_app.extensions["settings"]
    with _waiting_place():
        pool = _executor(machine_slots(settings.heavy_compute_concurrency))
        cells, error = pool.submit(measure, raw, compare, settings).result()
    if error is not None:
        _raise(error)
    return cells


def run(
    args: dict[str, Any] | None,
    failure_mode: str | None = None,
    compare: bool = False,
    binary: str | None = None,
    raw: bytes | None = None,
):
    """Compute a trace (from `args`, or from a large body still `raw`) in the background process;
    the open file of its answer (the server sends it, with sendfile where it can)."""
    settings = current_app.extensions["settings"]
    count = machine_slots(settings.heavy_compute_concurrency)
    with _waiting_place():
        with slot(count, wait=settings.heavy_compute_wait_seconds) as held:
            if not held:
                raise _busy(f"no large-trace slot came free within {settings.heavy_compute_wait_seconds:g} s")
            task = _executor(count).submit(compute_to_file, args, failure_mode, compare, binary, raw, settings)
            path, error = task.result()
    release_memory_when_idle()  # this worker's copies of bodies and answers, once traces stop coming
    if error is not None or path is None:
        _raise(error or {})
    body = open(path, "rb")  # noqa: SIM115 - closed by the server after sending
    os.unlink(path)  # the open descriptor keeps the data until the response is sent
    return body


def _busy(reason: str) -> Problem:
    return Problem(
        503,
        f"the server is computing as many large traces as it allows and {reason}; try again shortly",
        headers={"Retry-After": "1"},
        slug="busy",
    )


def warm_up(app) -> None:
    """Start this worker's compute process now, so the first large trace does not wait for it."""
    with app.app_context():
        _executor(machine_slots(app.extensions["settings"].heavy_compute_concurrency)).submit(_ready)


def _ready() -> bool:
    from . import traces  # noqa: F401  (imports numpy and the engine in the child)

    return True
