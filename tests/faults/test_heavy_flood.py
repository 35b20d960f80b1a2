"""Tiled passes and decodes at their caps, flooded from six networks, leave another learner their time
(issue 66, M3: computed in the request thread they slowed other learners 6 to 19x at p50).

Above the heavy threshold a tiled pass and a decode run in the background process at idle priority, as a
large trace does. Six networks (one address each, another /24 each) send the heaviest of both the service
accepts, back to back, ignoring Retry-After; half hang up at the status line, half download at their part
of a 1 Gbit/s link (test_flood.py's clients). A learner on a seventh network samples a workbench edit, a
mid-size trace and an event, ten a second, in rounds that alternate idle and flooded.

The issue's target is the learner's p50 within 2x idle in 8 of 10 runs; the ten runs are in
docs/performance.md ("Tiled and decode floods"). Here a run within 2x passes, and up to three runs are
tried (a run within 2x with probability 0.8 fails three times in 1 of 125), every learner request
answered in each: a regression to computing in the request thread (6x and more) fails all three.
"""

from __future__ import annotations

import multiprocessing
import statistics
import time

from ..live import LiveServer
from .test_flood import Learner, _address_flood, learner_rounds, p99
from .test_worker_kills import make_key

NETWORKS = [f"127.{20 + k}.0.2" for k in range(6)]
ROUNDS = 3
SAMPLES = 40  # per phase and round
# A sample (three requests) every 0.1 s: ten times a person's pace, within the fair share of a worker a
# learner keeps beside six flooding networks (back to back, the learner alone spent it: 503 busy on CI).
PACE = 0.1
RUNS = 3


def one_run(server, token: str) -> dict:
    """Idle and flooded phases in turn: the learner's samples of each, the flood's answers, the failures."""
    context = multiprocessing.get_context("spawn")
    manager = context.Manager()
    flooding, stop, outcome = manager.Event(), manager.Event(), manager.dict()
    idle: list[float] = []
    flooded: list[float] = []
    failures: list[str] = []
    try:
        learner = Learner(server.url, token)
        for _ in range(10):
            learner.sample([])  # warm
        with context.Pool(len(NETWORKS)) as pool:
            args = [
                (server.url, a, i % 2 == 0, flooding, stop, outcome, "tiled and decode") for i, a in enumerate(NETWORKS)
            ]
            flood = pool.starmap_async(_address_flood, args)
            while len(outcome) < len(NETWORKS):
                time.sleep(0.05)
            phases = {"idle": idle, "flooded": flooded}
            learner_rounds(learner, ROUNDS, SAMPLES, phases, flooding, failures, pace=PACE)
            stop.set()
            flood.get(timeout=120)
        sent = {a: dict(c) for a, c in outcome.items()}
    finally:
        stop.set()
        manager.shutdown()
    total = {k: sum(c.get(k, 0) for c in sent.values()) for k in ("sent", "200", "429", "503")}
    return {"idle": idle, "flooded": flooded, "failures": failures, "flood": total}


def said(run: dict) -> str:
    idle, flooded = run["idle"], run["flooded"]
    return (
        f"p50/p99 idle {statistics.median(idle) * 1000:.1f}/{p99(idle) * 1000:.1f} ms, flooded "
        f"{statistics.median(flooded) * 1000:.1f}/{p99(flooded) * 1000:.1f} ms "
        f"({statistics.median(flooded) / statistics.median(idle):.2f}x at p50); the flood {run['flood']}; "
        f"learner failures {len(run['failures'])} {run['failures'][:3]}"
    )


def test_tiled_and_decode_floods_from_six_networks_keep_a_learners_p50_within_twice_idle(tmp_path):
    from service.db.migrate import upgrade

    url = f"sqlite:///{tmp_path / 'wb.db'}"
    upgrade(url)
    env = {"WORKBENCH_DATABASE_URL": url, "WORKBENCH_RATELIMIT_KEY": "100000/minute"}  # the learner's samples
    server = LiveServer(env, workers=2, threads=8, extra_args=["-c", "gunicorn.conf.py"]).start()  # as served
    runs = []
    try:
        token = make_key(url)
        for _ in range(RUNS):
            runs.append(one_run(server, token))
            print("\n" + said(runs[-1]))
            if statistics.median(runs[-1]["flooded"]) <= 2 * statistics.median(runs[-1]["idle"]):
                break
    finally:
        server.stop()
    report = "\n".join(said(run) for run in runs)
    # A real flood: both kinds answered (the heavy slot busy), and no learner request refused or failed.
    assert all(run["flood"]["200"] >= 10 * ROUNDS for run in runs), report
    assert all(run["failures"] == [] for run in runs), report
    assert statistics.median(runs[-1]["flooded"]) <= 2 * statistics.median(runs[-1]["idle"]), report
