"""Large traces are computed away from the request threads, at low CPU priority.

A trace above `heavy_compute_cells` score cells is computed and encoded in a separate, niced
process; its JSON goes to a file in shared memory that gunicorn sends with sendfile, so the
worker's own threads stay free for small requests (event ingestion above all). Each worker
runs at most `heavy_compute_concurrency` of them at once and sheds the rest with 503 +
Retry-After rather than queueing them.
"""

from __future__ import annotations

import multiprocessing
import os
import tempfile
import threading
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from flask import current_app, send_file

from .problems import Problem

_lock = threading.Lock()
_pool: ProcessPoolExecutor | None = None
_pool_pid: int | None = None
_slots: threading.BoundedSemaphore | None = None
SHARED = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())
NICENESS = 19  # the lowest: small requests always run first


def _lower_priority() -> None:
    os.nice(NICENESS)


def _executor(concurrency: int) -> tuple[ProcessPoolExecutor, threading.BoundedSemaphore]:
    global _pool, _pool_pid, _slots
    with _lock:
        if _pool is None or _pool_pid != os.getpid():  # one pool per gunicorn worker, made after the fork
            context = multiprocessing.get_context("forkserver")
            _pool = ProcessPoolExecutor(max_workers=concurrency, mp_context=context, initializer=_lower_priority)
            _pool_pid = os.getpid()
            _slots = threading.BoundedSemaphore(concurrency)
        return _pool, _slots


def _compute_to_file(args: dict[str, Any], failure_mode: str | None, compare: bool) -> tuple[str | None, Any]:
    """In the niced process: compute, encode, write to shared memory; errors come back as data."""
    from . import attention

    try:
        body = attention.compare_body(args) if compare else attention.trace_body(args, failure_mode)
    except Problem as problem:  # the engine's AttentionInputError, already turned into a 422
        return None, {
            "status": problem.status,
            "detail": problem.detail,
            "errors": problem.errors,
            "slug": problem.slug,
        }
    from .jsonio import dumps_bytes

    handle, path = tempfile.mkstemp(prefix="workbench-trace-", suffix=".json", dir=SHARED)
    with os.fdopen(handle, "wb") as out:
        out.write(dumps_bytes(body))
    return path, None


def run(args: dict[str, Any], failure_mode: str | None = None, compare: bool = False):
    settings = current_app.extensions["settings"]
    pool, slots = _executor(settings.heavy_compute_concurrency)
    if not slots.acquire(blocking=False):
        raise Problem(
            503,
            "this worker is already computing large traces; try again shortly",
            headers={"Retry-After": "1"},
            slug="busy",
        )
    try:
        path, error = pool.submit(_compute_to_file, args, failure_mode, compare).result()
    finally:
        slots.release()
    if error is not None:
        raise Problem(error["status"], error["detail"], errors=error["errors"], slug=error["slug"])
    body = open(path, "rb")  # noqa: SIM115 - closed by the server after sending
    os.unlink(path)  # the open descriptor keeps the data until the response is sent
    return send_file(body, mimetype="application/json", max_age=0, conditional=False, etag=False)


def warm_up(app) -> None:
    """Start this worker's compute process now, so the first large trace does not wait for it."""
    with app.app_context():
        pool, _ = _executor(app.extensions["settings"].heavy_compute_concurrency)
        pool.submit(_ready)


def _ready() -> bool:
    from . import attention  # noqa: F401  (imports numpy and the engine in the child)

    return True
