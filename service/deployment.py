"""Checks about the host the service runs in: a service reachable from other machines needs a
real secret; a process spawned from a main script without a guard would run the script again;
rate limits in memory are per worker."""

from __future__ import annotations

import ipaddress
import re
import sys
from pathlib import Path

from .config import DEFAULT_SECRET, ConfigError, Settings


def is_loopback(bind: str) -> bool:
    """`127.0.0.1:8000`, `[::1]:8000`, `localhost:8000` and unix sockets are this machine only."""
    if bind.startswith("unix:"):
        return True
    host = bind.rsplit(":", 1)[0].strip("[]") if ":" in bind else bind
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def refuse_public_bind_without_secret(binds: list[str], settings: Settings) -> None:
    """Anyone who knows the development secret can forge a learner's cookie and read their events."""
    public = [b for b in binds if not is_loopback(b)]
    if public and (settings.secret_key == DEFAULT_SECRET or len(settings.secret_key) < 32):
        raise ConfigError(
            f"refusing to serve on {', '.join(public)} with the development secret: set WORKBENCH_SECRET_KEY "
            "(32+ random characters), or bind 127.0.0.1"
        )


GUARD = re.compile(r"""^if\s+__name__\s*==\s*['"]__main__['"]\s*:""", re.M)


def spawn_is_safe() -> bool:
    """Whether a spawned process can start here: it re-imports the main script, which without an
    `if __name__ == "__main__":` guard would run the host's own code again (its create_app, its
    app.run) in the compute process. A package's __main__ (python -m gunicorn) is not re-run."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    spec = getattr(main, "__spec__", None)
    if path is None or (spec is not None and spec.name.endswith("__main__")):
        return True
    try:
        return GUARD.search(Path(path).read_text(encoding="utf-8", errors="replace")) is not None
    except OSError:
        return False


def per_worker_limits_warning(settings: Settings, workers: int) -> str | None:
    """What to say at start-up when rate limits and budgets are counted per worker (the in-memory
    store with several workers): each worker then allows the whole limit."""
    if not settings.ratelimit_enabled or workers <= 1 or not settings.ratelimit_storage_uri.startswith("memory://"):
        return None
    return (
        f"rate limits and compute budgets are counted in each of the {workers} workers' memory "
        f"(WORKBENCH_RATELIMIT_STORAGE_URI={settings.ratelimit_storage_uri}): a client may get up to {workers} "
        "times each limit; set it to a shared store (redis://...) to count them once"
    )
