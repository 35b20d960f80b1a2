"""Large traces, computed away from the request threads, in one place: the machine-wide slots,
the background process pool, what runs in that process, and how it becomes a background one.

A trace above `heavy_compute_cells` score cells (or a body too large to parse in a request
thread, `background_parse_bytes`) is parsed, validated, computed and encoded in a separate
process under SCHED_IDLE; its answer goes to a file in shared memory that the server sends with
sendfile, so the worker's own threads stay free for small requests (event ingestion above all).
At most `heavy_compute_concurrency` run at once on the machine, across every worker (one less
than the cores by default, so one core is always left to the request path). A few requests per
worker wait for a slot (each holds a thread); the rest are shed with 503 + Retry-After.

This module imports nothing heavy (numpy loads in the compute process after it has become a
background one, with one BLAS thread): the pool's initializer is named from here.
"""

from __future__ import annotations

import fcntl
import hashlib
import multiprocessing
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from flask import current_app, request

from ...deployment import spawn_is_safe
from ...edge import CELLS
from ...edge.problems import Problem

SHARED = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())


# -- the request side: slots, the pool, waiting, the answer's file -------------------------

# One set of slots per machine (container) and user; instances that must not share theirs (two
# deployments on one machine, the test suite's parallel workers) each name their own directory.
SLOTS_DIR = Path(os.environ.get("WORKBENCH_HEAVY_SLOTS_DIR") or SHARED / f"workbench-heavy-{os.getuid()}")

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
        if not _pooled():
            cells, error = measure(raw, compare, settings)
        else:
            pool = _executor(machine_slots(settings.heavy_compute_concurrency))
            cells, error = _bounded(pool.submit(measure, raw, compare, settings), settings)
    if error is not None:
        raise Problem.from_data(error)
    return cells


def _pooled() -> bool:
    """The background pool where it can start (spawn_is_safe), else the request's own thread,
    within the same slots: a host script without a guard gets its answer, more slowly."""
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    safe = app.extensions.get("heavy_spawn_safe")
    if safe is None:
        safe = app.extensions["heavy_spawn_safe"] = spawn_is_safe()  # service/deployment.py
        if not safe:
            app.logger.warning("large traces are computed in request threads: the main script has no __main__ guard")
    return bool(safe)


def _bounded(task: Future, settings) -> Any:
    """The task's result within `heavy_compute_seconds`, else a 503 (the task is dropped)."""
    try:
        return task.result(timeout=settings.heavy_compute_seconds)
    except FutureTimeout:
        task.cancel()
        raise _busy(f"this one did not finish within {settings.heavy_compute_seconds:g} s") from None


def run(
    args: dict[str, Any] | None,
    failure_mode: str | None = None,
    compare: bool = False,
    binary: str | None = None,
    raw: bytes | None = None,
    body_of: str | None = None,
):
    """Compute a trace (from `args`, or from a large body still `raw`; a decode's or a tiled pass's answer
    when `body_of` names it) in the background process; the open file of its answer (the server sends it,
    with sendfile where it can)."""
    settings = current_app.extensions["settings"]
    path, error = in_background(compute_to_file, args, failure_mode, compare, binary, raw, settings, body_of)
    release_memory_when_idle()  # this worker's copies of bodies and answers, once traces stop coming
    if error is not None or path is None:
        raise Problem.from_data(error or {})
    body = open(path, "rb")  # noqa: SIM115 - closed by the server after sending
    os.unlink(path)  # the open descriptor keeps the data until the response is sent
    return body


def in_background(fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)` in the background process at idle priority, within the machine's slots and the deadline
    of a large trace (here when there is no pool: tests); what it raises is raised here."""
    settings = current_app.extensions["settings"]
    count = machine_slots(settings.heavy_compute_concurrency)
    with _waiting_place():
        with slot(count, wait=settings.heavy_compute_wait_seconds) as held:
            if not held:
                raise _busy(f"no large-trace slot came free within {settings.heavy_compute_wait_seconds:g} s")
            if _pooled():
                return _bounded(_executor(count).submit(fn, *args), settings)
            return fn(*args)


def charged_heavy() -> bool:
    """Whether this request's cost (the edge measured it) is heavy: then it is computed in the background."""
    return (request.environ.get(CELLS) or 0) >= current_app.extensions["settings"].heavy_compute_cells


def computed(fn: Callable[..., Any], *args: Any) -> Any:
    """A charged computation whose answer is small (a check's verdict): in the background process when the
    request's cost is heavy, as a large trace is; else here."""
    return in_background(fn, *args) if charged_heavy() else fn(*args)


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
        if not _pooled():
            return
        _executor(machine_slots(app.extensions["settings"].heavy_compute_concurrency)).submit(_ready)


def _ready() -> bool:
    from . import traces  # noqa: F401  (imports numpy and the engine in the child)

    return True


# -- the compute process's side ------------------------------------------------------------


def _parse(raw: bytes, compare: bool, settings) -> tuple[dict[str, Any] | None, int, dict[str, Any] | None]:
    """In the background process: a large body parsed and validated exactly as a request thread
    would (strict JSON, caps first, the same schema, the same 4xx), with its cost."""
    from marshmallow import ValidationError

    from ...edge.body import parse_json
    from ...edge.problems import flatten_errors, invalid_fields
    from ..schemas.attention import AttentionRequestSchema, CompareRequestSchema
    from .caps import cost, refuse_over_caps

    try:
        body = parse_json(raw)
        refuse_over_caps(body, settings)  # before any element is validated or any array made
        try:
            args = (CompareRequestSchema() if compare else AttentionRequestSchema()).load(body)
        except ValidationError as error:
            raise invalid_fields(flatten_errors(error.normalized_messages())) from None
    except Problem as problem:
        return None, 0, problem.as_data()
    return args, cost(args["tokens"], args["heads"], compare), None


IDLE_SECONDS_BEFORE_RELEASE = 2.0
_release_timer: threading.Timer | None = None


def release_memory_when_idle() -> None:
    """In the background process: once no trace has started for a while, hand the memory the
    last ones used back to the kernel (each new trace postpones it)."""
    global _release_timer
    from .allocator import release_freed_memory

    if _release_timer is not None:
        _release_timer.cancel()
    _release_timer = threading.Timer(IDLE_SECONDS_BEFORE_RELEASE, release_freed_memory)
    _release_timer.daemon = True
    _release_timer.start()


_last_parsed: tuple[bytes, Any] | None = None  # (body digest, arguments): the measured body, for its compute


def measure(raw: bytes, compare: bool, settings) -> tuple[int, dict[str, Any] | None]:
    """In the background process: the cost of a large body, or the problem with it. The body's
    arguments are kept for the compute that follows (when this process gets it): parsing 1.2 MB
    of JSON again cost a tenth of a large trace's time."""
    global _last_parsed
    args, cells, error = _parse(raw, compare, settings)
    _last_parsed = None if args is None else (_digest(raw, compare), args)
    return cells, error


def _parsed(raw: bytes, compare: bool, settings) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """In the background process: a large body's arguments (kept by `measure`, else parsed), or its problem."""
    global _last_parsed
    kept, _last_parsed = _last_parsed, None
    if kept is not None and kept[0] == _digest(raw, compare):
        return kept[1], None
    args, _, error = _parse(raw, compare, settings)
    return args, error


def _digest(raw: bytes, compare: bool) -> bytes:

    return hashlib.blake2b(raw, digest_size=16, person=b"compare" if compare else b"attention").digest()


def compute_to_file(
    args: dict[str, Any] | None,
    failure_mode: str | None,
    compare: bool,
    binary: str | None = None,
    raw: bytes | None = None,
    settings: Any = None,
    body_of: str | None = None,
) -> tuple[str | None, Any]:
    """In the background process: compute, encode, write to shared memory; errors come back as
    data. A large body comes `raw` and is parsed here again: cheaper than carrying its arrays
    through the worker twice."""
    from . import traces

    if raw is not None:
        args, error = _parsed(raw, compare, settings)
        if error is not None or args is None:
            return None, error
        failure_mode = None if compare else args.get("failure_mode")
    assert args is not None
    try:
        if body_of is not None:
            body = traces.decode_body(args) if body_of == "decode" else traces.tiled_body(args)
        else:
            body = traces.compare_body(args) if compare else traces.trace_body(args, failure_mode)
    except Problem as problem:  # the engine's AttentionInputError, already turned into a 422
        return None, problem.as_data()

    handle, path = tempfile.mkstemp(prefix="workbench-trace-", suffix=".bin" if binary else ".json", dir=SHARED)
    try:
        with os.fdopen(handle, "wb") as out:
            traces.write(body, binary, out)  # straight into shared memory, tensor by tensor
    except BaseException:
        os.unlink(path)  # a failure leaves nothing behind
        raise
    release_memory_when_idle()
    return path, None


# -- making the compute process a background one ---------------------------------------------


def start_compute_process(retain_memory: bool = True, threads: int = 1) -> None:
    """The initializer of the background pool's processes. `threads`: how many cores the
    engine may spread one trace over (heavy.compute_threads: the compute processes together
    never take the core kept for the request path)."""
    from ...compute import parallel
    from .allocator import become_background, die_with_parent, retain_freed_memory

    die_with_parent()
    become_background()
    parallel.limit_threads(threads)
    if retain_memory:
        retain_freed_memory()  # large traces otherwise re-fault their buffers on every request
