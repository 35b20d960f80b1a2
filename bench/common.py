"""Shared pieces of the benchmarks: a gunicorn under test, wrk, machine facts."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tree_cpu_seconds(root: int) -> float:
    """CPU time used so far by a process and all its descendants (from /proc)."""
    parents: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        parents[int(entry.name)] = int(fields[1])
        ticks[int(entry.name)] = int(fields[11]) + int(fields[12])
    tree, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent]
        tree.update(children)
        frontier += children
    return sum(ticks.get(pid, 0) for pid in tree) / os.sysconf("SC_CLK_TCK")


def settle(pid: int, busy: float = 0.05, timeout: float = 30.0) -> None:
    """Wait until a server and its children stop working after start-up (workers import and warm
    up, each starts its compute process): measuring while they still compile would measure them."""
    deadline = time.monotonic() + timeout
    used = _tree_cpu_seconds(pid)
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = _tree_cpu_seconds(pid)
        if now - used < busy * 0.5:
            return
        used = now


class Gunicorn:
    """`gunicorn -w WORKERS app` on a free port; stopped on exit."""

    def __init__(
        self,
        app: str,
        env: dict[str, str] | None = None,
        workers: int = 2,
        threads: int = 1,
        cwd: Path = ROOT,
        health: str = "/healthz",
        config: str | None = None,
        worker: str | None = None,
    ):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.cmd = [
            str(BIN / "gunicorn"),
            "-w",
            str(workers),
            "--threads",
            str(threads),
            "-b",
            f"127.0.0.1:{self.port}",
            "--log-level",
            "warning",
            *(["-c", config] if config else []),  # the command line still decides workers, threads, bind
            *(["-k", worker] if worker else []),
            app,
        ]
        self.env = {**os.environ, **(env or {})}
        self.cwd = cwd
        self.health = health
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> Gunicorn:
        self.proc = subprocess.Popen(self.cmd, cwd=self.cwd, env=self.env, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                requests.get(self.url + self.health, timeout=2)
                settle(self.proc.pid)
                return self
            except requests.RequestException:  # not listening yet, or workers still booting
                time.sleep(0.2)
        self.__exit__()
        raise RuntimeError(f"{self.cmd} did not start")

    def __exit__(self, *exc) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def fresh_schema(url: str) -> None:
    """An empty, migrated database at `url` (PostgreSQL: the public schema is dropped first)."""
    from sqlalchemy import create_engine, text

    from service.db.migrate import upgrade

    if url.startswith("postgresql"):
        engine = create_engine(url)
        with engine.begin() as conn:
            conn.execute(text("DROP SCHEMA IF EXISTS public CASCADE; CREATE SCHEMA public"))
        engine.dispose()
    upgrade(url)


def migrated_sqlite(directory: str | None = None) -> str:
    path = Path(directory or tempfile.mkdtemp(prefix="bench-")) / "bench.db"
    url = f"sqlite:///{path}"
    subprocess.run(
        [str(BIN / "workbench"), "db", "upgrade"],
        env={**os.environ, "WORKBENCH_DATABASE_URL": url},
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return url


def wrk_post(
    url: str,
    body: dict,
    seconds: int = 5,
    connections: int = 8,
    threads: int = 2,
    headers: dict[str, str] | None = None,
) -> dict:
    """Requests/s and latency of POSTing `body` with wrk; non-2xx responses are counted."""
    if not shutil.which("wrk"):
        raise FileNotFoundError("wrk is not installed (apt-get install wrk)")
    script = Path(tempfile.mkdtemp()) / "post.lua"
    lines = [
        'wrk.method = "POST"',
        f"wrk.body = {json.dumps(json.dumps(body))}",
        'wrk.headers["Content-Type"] = "application/json"',
    ]
    lines += [f'wrk.headers["{k}"] = {json.dumps(v)}' for k, v in (headers or {}).items()]
    script.write_text("\n".join(lines) + "\n")
    out = subprocess.run(
        ["wrk", f"-t{threads}", f"-c{connections}", f"-d{seconds}s", "-s", str(script), url],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    errors = re.search(r"Socket errors: (.*)", out)
    return {
        "rps": rps,
        "non_2xx": int(non2xx.group(1)) if non2xx else 0,
        "socket_errors": errors.group(1) if errors else "",
    }


def emit(result: dict, as_json: bool) -> None:
    if as_json or result.get("skipped"):
        print(json.dumps(result), flush=True)
    else:
        print(
            f"{result['name']}: {result['figure']} {result['unit']} vs {result['baseline']} "
            f"{result['baseline_figure']} -> ratio {result['ratio']} (budget {result['budget']}: "
            f"{'ok' if result['ok'] else 'OVER'})",
            flush=True,
        )
