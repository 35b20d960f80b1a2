"""A worker killed with SIGKILL takes its background compute process with it; a stopped server
leaves no compute process and no trace file behind."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from service.api.attention.offload import SHARED

from ..live import LiveServer


def children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().split()[2] if Path(f"/proc/{pid}/stat").exists() else "X"
    return state != "Z"


def wait_for(condition, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


@pytest.mark.databases
def test_a_killed_worker_takes_its_compute_process_along(database_url):
    url = database_url
    traces_before = set(SHARED.glob("workbench-trace-*"))
    server = LiveServer({"WORKBENCH_DATABASE_URL": url, "WORKBENCH_RATELIMIT_ENABLED": "0"}, workers=2).start()
    try:
        workers = server.worker_pids()
        assert wait_for(lambda: all(children(w) for w in workers)), "each worker starts its compute process"
        compute = {w: children(w) for w in workers}
        victim = workers[0]
        os.kill(victim, signal.SIGKILL)
        assert wait_for(lambda: not any(alive(p) for p in compute[victim])), (
            f"compute processes {compute[victim]} outlived their killed worker {victim}"
        )
        assert all(alive(p) for p in compute[workers[1]])  # the other worker's are untouched
    finally:
        server.stop()
    every = [p for group in compute.values() for p in group]
    assert wait_for(lambda: not any(alive(p) for p in every)), "compute processes outlived the server"
    assert set(SHARED.glob("workbench-trace-*")) <= traces_before
