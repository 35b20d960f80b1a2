"""Checks before serving: a service reachable from other machines needs a real secret."""

from __future__ import annotations

import ipaddress

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
