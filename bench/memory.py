"""Peak memory per gunicorn worker under 32 concurrent maximum-size requests, and after the burst.

The service runs exactly as shipped (`gunicorn.conf.py`: 2 workers of 8 threads, one compute
process per worker), with rate limits and compute budgets off, so every request is admitted
that the service's own waiting room admits. 32 clients each POST the largest body the caps
allow (n=512, d_model=1024, heads=2: 524,288 score cells, 3.7 MB of JSON), read the whole
answer, and retry on 503 until each has one trace. Resident memory of every worker and of every
compute process is sampled every 20 ms from /proc.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

import numpy as np
import orjson
import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.common import Gunicorn, emit, migrated_sqlite  # noqa: E402

CLIENTS = 32
BUDGET_MIB = 512


def children(pid: int) -> list[int]:
    try:
        found = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []
    return [int(p) for p in found]


def rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class Sampler(threading.Thread):
    """Peak RSS of each worker and each of their children (the compute processes)."""

    def __init__(self, master: int):
        super().__init__(daemon=True)
        self.master = master
        self.workers: dict[int, float] = {}
        self.compute: dict[int, float] = {}
        self.stop = threading.Event()

    def snapshot(self) -> tuple[dict[int, float], dict[int, float]]:
        workers = {w: rss_mib(w) for w in children(self.master)}
        compute = {c: rss_mib(c) for w in workers for c in children(w)}
        return workers, compute

    def run(self) -> None:
        while not self.stop.is_set():
            workers, compute = self.snapshot()
            for table, now in ((self.workers, workers), (self.compute, compute)):
                for pid, mib in now.items():
                    table[pid] = max(table.get(pid, 0.0), mib)
            time.sleep(0.02)


def one_trace(url: str, body: bytes, received: list[int]) -> None:
    session = requests.Session()
    headers = {"Content-Type": "application/json"}
    while True:
        with session.post(url, data=body, headers=headers, stream=True, timeout=300) as response:
            size = sum(len(chunk) for chunk in response.iter_content(1 << 20))
            if response.status_code == 200:
                received.append(size)
                return
            assert response.status_code == 503, response.status_code
        time.sleep(0.2)


def burst() -> dict:
    rng = np.random.default_rng(0)
    body = orjson.dumps({"tokens": rng.normal(size=(512, 1024)).round(3).tolist(), "heads": 2})
    env = {"WORKBENCH_DATABASE_URL": migrated_sqlite(), "WORKBENCH_RATELIMIT_ENABLED": "0"}
    with Gunicorn("service.app:create_app()", env, workers=2, threads=8, config="gunicorn.conf.py") as app:
        time.sleep(3)  # the compute processes have started and imported numpy
        sampler = Sampler(app.proc.pid)
        before_workers, before_compute = sampler.snapshot()
        sampler.start()
        received: list[int] = []
        clients = [
            threading.Thread(target=one_trace, args=(app.url + "/api/v1/attention", body, received))
            for _ in range(CLIENTS)
        ]
        started = time.perf_counter()
        for client in clients:
            client.start()
        for client in clients:
            client.join()
        seconds = time.perf_counter() - started
        sampler.stop.set()
        sampler.join()
        time.sleep(5)
        after_workers, after_compute = sampler.snapshot()
    assert len(received) == CLIENTS
    peak_worker = max(sampler.workers.values())
    peak_compute = max(sampler.compute.values())
    return {
        "name": f"peak RSS of a worker, {CLIENTS} concurrent maximum-size requests "
        f"({len(body) / 1e6:.1f} MB in, {received[0] / 1e6:.0f} MB out each, {seconds:.0f} s); "
        f"its compute process peaked at {peak_compute:.0f} MiB; 5 s after the burst workers hold "
        f"{max(after_workers.values()):.0f} MiB and compute processes {max(after_compute.values()):.0f} MiB",
        "figure": round(peak_worker, 1),
        "unit": "MiB",
        "baseline": "worker before the burst",
        "baseline_figure": round(max(before_workers.values()), 1),
        "ratio": round(peak_worker / max(before_workers.values()), 2),
        "budget": f"< {BUDGET_MIB} MiB per worker (and its compute process); memory returned after the burst",
        "ok": peak_worker < BUDGET_MIB
        and peak_compute < BUDGET_MIB
        and max(after_workers.values()) < max(before_workers.values()) + 64,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    emit(burst(), parser.parse_args().json)


if __name__ == "__main__":
    main()
