"""The background process's side of large traces (heavy.py): parse and validate a large body as
a request thread would, compute and encode its trace into shared memory, hand memory back once
idle. Everything here runs in the compute process; errors cross back as plain data."""

from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path
from typing import Any

from ..edge.problems import Problem

SHARED = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())


def problem_data(problem: Problem) -> dict[str, Any]:
    """A Problem as plain data, to cross the process boundary."""
    return {
        "status": problem.status,
        "detail": problem.detail,
        "title": problem.title,
        "errors": problem.errors,
        "slug": problem.slug,
        "extra": problem.extra,
    }


_compute_app: Any = None


def _settings_context(settings):
    """In the background process: an app context whose only content is the settings (the caps)."""
    global _compute_app
    from flask import Flask

    if _compute_app is None:
        _compute_app = Flask("workbench-compute")
    _compute_app.extensions["settings"] = settings  # each task brings the caller's settings
    return _compute_app.app_context()


def _parse(raw: bytes, compare: bool, settings) -> tuple[dict[str, Any] | None, int, dict[str, Any] | None]:
    """In the background process: a large body parsed and validated exactly as a request thread
    would (strict JSON, caps first, the same schema, the same 4xx), with its cost."""
    from marshmallow import ValidationError

    from ..edge.body import parse_json
    from ..edge.limits import cost
    from ..edge.problems import flatten_errors, invalid_fields
    from .schemas.attention import AttentionRequestSchema, CompareRequestSchema

    try:
        with _settings_context(settings):
            body = parse_json(raw)
            try:
                args = (CompareRequestSchema() if compare else AttentionRequestSchema()).load(body)
            except ValidationError as error:
                raise invalid_fields(flatten_errors(error.normalized_messages())) from None
    except Problem as problem:
        return None, 0, problem_data(problem)
    return args, cost(args["tokens"], args["heads"], compare), None


IDLE_SECONDS_BEFORE_RELEASE = 2.0
_release_timer: threading.Timer | None = None


def release_memory_when_idle() -> None:
    """In the background process: once no trace has started for a while, hand the memory the
    last ones used back to the kernel (each new trace postpones it)."""
    global _release_timer
    from ..compute.allocator import release_freed_memory

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
    import hashlib

    return hashlib.blake2b(raw, digest_size=16, person=b"compare" if compare else b"attention").digest()


def compute_to_file(
    args: dict[str, Any] | None,
    failure_mode: str | None,
    compare: bool,
    binary: str | None = None,
    raw: bytes | None = None,
    settings: Any = None,
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
        body = traces.compare_body(args) if compare else traces.trace_body(args, failure_mode)
    except Problem as problem:  # the engine's AttentionInputError, already turned into a 422
        return None, problem_data(problem)

    handle, path = tempfile.mkstemp(prefix="workbench-trace-", suffix=".bin" if binary else ".json", dir=SHARED)
    try:
        with os.fdopen(handle, "wb") as out:
            traces.write(body, binary, out)  # straight into shared memory, tensor by tensor
    except BaseException:
        os.unlink(path)  # a failure leaves nothing behind
        raise
    release_memory_when_idle()
    return path, None
