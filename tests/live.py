"""A real gunicorn serving the app in a subprocess, for tests that need real sockets and workers."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveServer:
    def __init__(self, env: dict[str, str], workers: int = 2, threads: int = 1, extra_args: list[str] | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {**os.environ, "WORKBENCH_ENV": "testing", "WORKBENCH_PUBLIC_URL": self.url, **env}
        self.workers = workers
        self.threads = threads
        self.extra_args = extra_args or []
        self.proc: subprocess.Popen | None = None

    def start(self) -> LiveServer:
        gunicorn = Path(sys.executable).with_name("gunicorn")
        self.proc = subprocess.Popen(
            [
                str(gunicorn),
                "-w",
                str(self.workers),
                "--threads",
                str(self.threads),
                "-b",
                f"127.0.0.1:{self.port}",
                "--graceful-timeout",
                "2",
                "--log-level",
                "warning",
                *self.extra_args,
                "service.app:create_app()",
            ],
            cwd=ROOT,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gunicorn exited: {self.proc.stderr.read().decode()[-2000:]}")
            try:
                if requests.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return self
            except requests.RequestException:  # not listening yet, or workers still booting
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("gunicorn did not start within 30 s")

    def worker_pids(self) -> list[int]:
        out = subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True, text=True).stdout
        return [int(p) for p in out.split()]

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def sqlite_server(directory: Path, workers: int = 1, extra_args: list[str] | None = None, **env: str) -> LiveServer:
    """A started gunicorn on a fresh, migrated SQLite database in `directory`, rate limits off."""
    from service.db.migrate import upgrade

    url = f"sqlite:///{directory / 'wb.db'}"
    upgrade(url)
    return LiveServer(
        {"WORKBENCH_DATABASE_URL": url, "WORKBENCH_RATELIMIT_ENABLED": "0", **env},
        workers=workers,
        extra_args=extra_args,
    ).start()
