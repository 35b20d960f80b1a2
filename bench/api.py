"""API throughput and large-trace latency, each against a baseline measured in the same run.

1. The workbench request (3 tokens x 4 dims, 2 heads, everything returned) served by gunicorn
   with the project's gunicorn.conf.py (2 workers of 8 threads, its own worker class), against the
   most trivial Flask JSON endpoint on gunicorn's gthread with as many threads; rate limits off (the
   baseline has no limiter); wrk drives them in turn. Budget: ratio >= 0.85. A bare numpy handler
   (trivial_app.py's /bare) serves the same trace in the same gunicorn (the service's worker class):
   the workbench request at >= 0.95 of it (issue 53); the same handler on stock gthread shows what
   the worker's slow-client defences cost, apart from the request's path.
2. A large trace (n=256, d_model=512, H=8, everything returned) end to end over HTTP against
   the engine alone in this process. Budget: ratio <= 2.0.

    python bench/api.py [--seconds 4] [--rounds 7] [--json]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import orjson
import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.common import Gunicorn, emit, migrated_sqlite, wrk_post  # noqa: E402
from service.api.attention.allocator import retain_freed_memory  # noqa: E402
from service.compute import multi_head_attention  # noqa: E402
from service.presets import presets  # noqa: E402

WORKER = "service.server.worker.BufferingWorker"  # gunicorn.conf.py's worker_class


def throughput(seconds: int, rounds: int) -> dict:
    body = presets()["workbench"]["request"]
    env = {"WORKBENCH_DATABASE_URL": migrated_sqlite(), "WORKBENCH_RATELIMIT_ENABLED": "0"}
    ours, base, bare, bare_stock = [], [], [], []
    conf = str(ROOT / "gunicorn.conf.py")
    plain = {"env": {"PYTHONPATH": str(ROOT)}, "cwd": Path(__file__).parent, "health": "/", "threads": 8}
    with (
        Gunicorn("service.app:create_app()", env, threads=8, config=conf) as app,
        # gunicorn's own threaded worker (8 threads make it gthread), without the service's hooks
        Gunicorn("trivial_app:app", **plain) as trivial,  # type: ignore[arg-type]
        # the same bare handler in the same gunicorn as the service: its worker (service/server/worker.py)
        Gunicorn("trivial_app:app", **plain, worker=WORKER) as same,  # type: ignore[arg-type]
    ):
        servers = [
            (ours, app.url + "/api/v1/attention"),
            (base, trivial.url + "/echo"),
            (bare, same.url + "/bare"),
            (bare_stock, trivial.url + "/bare"),
        ]
        for _, url in servers:
            wrk_post(url, body, seconds=1)  # warm up
        for _ in range(rounds):
            for results, url in servers:
                results.append(wrk_post(url, body, seconds))
    if any(r["non_2xx"] for r in ours + base + bare + bare_stock):
        raise RuntimeError(f"non-2xx responses during the benchmark: {ours} {base} {bare} {bare_stock}")
    ratios = [o["rps"] / b["rps"] for o, b in zip(ours, base, strict=True)]
    ratio = statistics.median(ratios)
    against_bare = [o["rps"] / n["rps"] for o, n in zip(ours, bare, strict=True)]
    worker_cost = statistics.median(n["rps"] / s["rps"] for n, s in zip(bare, bare_stock, strict=True))
    return {
        "name": "POST /attention, workbench case, gunicorn.conf.py (2 workers x 8 threads); against a bare numpy "
        f"handler (the same trace in a plain Flask view) in the same gunicorn {statistics.median(against_bare):.2f} "
        f"(issue 53: >= 0.95); that bare handler served by the service's worker runs at {worker_cost:.2f} of "
        "itself on gunicorn's stock gthread (what the slow-client defences cost)",
        "figure": round(statistics.median(o["rps"] for o in ours)),
        "unit": "requests/s",
        "baseline": "trivial Flask JSON endpoint, stock gthread",
        "baseline_figure": round(statistics.median(b["rps"] for b in base)),
        "ratio": round(ratio, 3),
        "ratio_range": [round(min(ratios), 3), round(max(ratios), 3)],
        "against_bare": round(statistics.median(against_bare), 3),
        "against_bare_range": [round(min(against_bare), 3), round(max(against_bare), 3)],
        "worker_cost": round(worker_cost, 3),
        "budget": "ratio >= 0.85 and against_bare >= 0.95",
        "ok": ratio >= 0.85 and statistics.median(against_bare) >= 0.95,
    }


def large_trace(repeats: int = 15, binary: bool = False) -> dict:
    retain_freed_memory()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(256, 512)).round(6)
    # The client sends pre-encoded bytes and only reads the answer: the figure is the service's.
    body = orjson.dumps({"tokens": x, "heads": 8}, option=orjson.OPT_SERIALIZE_NUMPY)
    headers = {"Content-Type": "application/json"}
    if binary:
        headers["Accept"] = "application/octet-stream"
    env = {"WORKBENCH_DATABASE_URL": migrated_sqlite(), "WORKBENCH_RATELIMIT_ENABLED": "0"}
    with (
        Gunicorn("service.app:create_app()", env, workers=1) as app,
        Gunicorn("transfer_app:app", cwd=Path(__file__).parent, health="/", workers=1) as transfer,
    ):
        session = requests.Session()
        url = app.url + "/api/v1/attention"
        size = len(session.post(url, data=body, headers=headers).content)
        floor_url = f"{transfer.url}/blob/{size}"
        http_times, engine_times, floor_times, parse_times = [], [], [], []
        for _ in range(repeats):
            http_times.append(_timed(lambda: session.post(url, data=body, headers=headers), size))
            start = time.perf_counter()
            multi_head_attention(x, 8)
            engine_times.append(time.perf_counter() - start)
            floor_times.append(_timed(lambda: session.post(floor_url, data=body, headers=headers), size))
            start = time.perf_counter()
            np.asarray(orjson.loads(body)["tokens"], dtype=np.float64)  # reading the request, nothing else
            parse_times.append(time.perf_counter() - start)
    http_ms = statistics.median(http_times) * 1e3
    parse_ms = statistics.median(parse_times) * 1e3
    engine_ms = statistics.median(engine_times) * 1e3
    floor_ms = statistics.median(floor_times) * 1e3
    return {
        "name": f"large trace n=256 d_model=512 H=8, everything returned "
        f"({size / 1e6:.1f} MB {'safetensors' if binary else 'JSON'}), end to end; "
        f"moving an answer that size alone (same server and client, made in advance) took {floor_ms:.1f} ms; "
        f"turning the {len(body) / 1e6:.1f} MB JSON body into an array alone, {parse_ms:.1f} ms",
        "figure": round(http_ms, 1),
        "unit": "ms (median)",
        "baseline": "engine alone, in process",
        "baseline_figure": round(engine_ms, 2),
        "ratio": round(http_ms / engine_ms, 2),
        "budget": "ratio <= 2.0",
        "ok": http_ms / engine_ms <= 2.0,
    }


def _timed(post, size: int) -> float:
    start = time.perf_counter()
    response = post()
    assert response.status_code == 200 and len(response.content) == size
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=7)  # this VM's speed swings within seconds: more pairs
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    try:
        emit(throughput(args.seconds, args.rounds), args.json)
    except FileNotFoundError as exc:
        emit({"name": "POST /attention vs trivial endpoint", "skipped": str(exc), "budget": "ratio >= 0.85"}, True)
    emit(large_trace(), args.json)
    emit(large_trace(binary=True), args.json)


if __name__ == "__main__":
    main()
