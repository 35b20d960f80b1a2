"""gunicorn's hooks (gunicorn.conf.py names them): the checks before serving, the metrics directory
of each instance, gunicorn's own errors as problem+json in every worker, and the app's work once a
worker has it (the background compute process, an in-process analytics sync), which the app hands
down in `app.extensions["worker_starts"]` (`on_worker_start`) instead of this room importing it."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from typing import Any

from ..config import Settings
from ..deployment import per_worker_limits_warning, refuse_public_bind_without_secret
from .wire import refusal


def metrics_directory() -> str:
    """Prometheus counters from every worker, summed at scrape time: one directory per instance
    (named after the master's pid), so two instances on one machine neither mix nor wipe theirs."""
    import tempfile

    return os.environ.setdefault(
        "PROMETHEUS_MULTIPROC_DIR", os.path.join(tempfile.gettempdir(), f"workbench-metrics-{os.getpid()}")
    )


def on_starting(server) -> None:
    settings = Settings.load()
    refuse_public_bind_without_secret([str(b) for b in server.cfg.bind], settings)
    warning = per_worker_limits_warning(settings, server.cfg.workers)
    if warning:
        server.log.warning(warning)
    shutil.rmtree(metrics_directory(), ignore_errors=True)
    os.makedirs(metrics_directory(), exist_ok=True)


def on_exit(server) -> None:
    shutil.rmtree(metrics_directory(), ignore_errors=True)


def child_exit(server, worker) -> None:
    from prometheus_client import multiprocess  # in the master: after the metrics directory exists

    multiprocess.mark_process_dead(worker.pid)


def post_fork(server, worker) -> None:
    """Errors gunicorn answers itself (a malformed request line, a URI over `limit_request_line`, a bad
    Content-Length, too many headers) never reach the app: gunicorn writes them through
    `gunicorn.util.write_error`, as HTML. Replaced in each worker, they have every other error's shape."""
    from gunicorn import util

    util.write_error = write_problem


def write_problem(sock, status_int: int, reason: str, mesg: str) -> None:
    from gunicorn import util

    util.write_nonblock(sock, refusal(int(status_int), reason.encode(), (mesg or reason).encode()))


def on_worker_start(app: Any, start: Callable[[Any], object]) -> None:
    """Have `start(app)` run in each worker once it has the app (gunicorn's `post_worker_init`)."""
    app.extensions.setdefault("worker_starts", []).append(start)


def post_worker_init(worker) -> None:
    for start in worker.wsgi.extensions.get("worker_starts", ()):
        start(worker.wsgi)
