"""Large traces take the low-priority path and answer exactly what the direct path does."""

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import orjson
import pytest

from service.api.attention import offload as heavy
from service.app import create_app

ROOT = Path(__file__).resolve().parents[2]

BODY = {"tokens": np.random.default_rng(9).normal(size=(12, 8)).round(3).tolist(), "heads": 2}


def test_the_heavy_path_returns_the_same_json(app_config):
    direct = create_app(app_config).test_client().post("/api/v1/attention", json=BODY)
    offloaded = create_app({**app_config, "heavy_compute_cells": 1}).test_client().post("/api/v1/attention", json=BODY)
    assert offloaded.status_code == 200 and offloaded.mimetype == "application/json"
    assert orjson.loads(offloaded.get_data()) == orjson.loads(direct.get_data())
    offloaded.close()


LONG = {"tokens": np.random.default_rng(4).normal(size=(10, 4)).round(3).tolist(), "heads": 2, "window": 3, "sinks": 1}


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/v1/attention/decode", LONG),
        ("/api/v1/attention/tiled", {**LONG, "block_q": 3, "block_k": 2}),
        ("/api/v1/attention/tiled", {**LONG, "block_q": 2, "block_k": 2, "failure_mode": "online_no_rescale"}),
    ],
)
def test_a_heavy_decode_or_tiled_pass_runs_in_the_background_and_answers_the_same(app_config, monkeypatch, path, body):
    """Issue 66, M3: above the heavy threshold a decode and a tiled pass are computed by the background process
    (at idle priority, as a large trace is), never in the request thread, with the same answer."""
    direct = create_app(app_config).test_client().post(path, json=body)
    ran: list[str | None] = []
    real = heavy.run
    monkeypatch.setattr(heavy, "run", lambda *a, **k: ran.append(k.get("body_of")) or real(*a, **k))
    offloaded = create_app({**app_config, "heavy_compute_cells": 1}).test_client().post(path, json=body)
    assert direct.status_code == offloaded.status_code == 200 and ran == [path.rsplit("/", 1)[1]]
    assert orjson.loads(offloaded.get_data()) == orjson.loads(direct.get_data())
    offloaded.close()


def test_the_heavy_path_reports_input_errors_as_422(app_config):
    client = create_app({**app_config, "heavy_compute_cells": 1}).test_client()
    response = client.post("/api/v1/attention", json={"tokens": [[1e200] * 4] * 3, "heads": 2})
    assert response.status_code == 422 and "overflowed" in response.json["detail"]
    compare = client.post("/api/v1/attention/compare", json={**BODY, "failure_mode": "no_scaling"})
    assert compare.status_code == 200 and set(orjson.loads(compare.get_data())) >= {"correct", "broken"}
    compare.close()


def test_large_traces_beyond_the_machine_slots_are_shed_with_503(app_config):
    app = create_app(
        {**app_config, "heavy_compute_cells": 1, "heavy_compute_concurrency": 2, "heavy_compute_wait_seconds": 0}
    )
    client = app.test_client()
    with heavy.slot(2) as first, heavy.slot(2) as second:  # as if two other workers were computing
        assert first and second
        response = client.post("/api/v1/attention", json=BODY)
    assert response.status_code == 503 and response.headers["Retry-After"] == "1"
    assert response.mimetype == "application/problem+json"
    assert client.post("/api/v1/attention", json={"tokens": [[1.0, 2.0]], "heads": 1}).status_code == 200
    with heavy.slot(2) as held:  # one slot still taken: the trace runs in the other
        assert held
        freed = client.post("/api/v1/attention", json=BODY)
    assert freed.status_code == 200
    freed.close()


def test_a_slot_held_by_a_killed_process_is_free_again():
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from service.api.attention import offload as heavy; import time\nwith heavy.slot(1) as h:\n"
            "    print(h, flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        cwd=Path(__file__).resolve().parents[2],
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "True"
        with heavy.slot(1) as held:
            assert not held
    finally:
        holder.kill()
        holder.wait()
    with heavy.slot(1) as held:
        assert held


def test_background_processes_yield_the_cpu_on_every_thread(app_config):
    app = create_app({**app_config, "heavy_compute_cells": 1})
    with app.app_context():
        policies = heavy._executor(1).submit(_policies).result()
    assert policies and set(policies) == {os.SCHED_IDLE}


def test_one_large_trace_never_takes_the_core_kept_for_requests(app_config):
    app = create_app({**app_config, "heavy_compute_cells": 1})
    with app.app_context():
        threads = heavy._executor(1).submit(_engine_threads).result()
    assert threads == max(1, (os.cpu_count() or 2) - 1)  # 2 cores: the engine runs serial in there


def _engine_threads() -> int:
    from service.compute import parallel

    return parallel.cores()


def _policies() -> list[int]:
    import numpy  # noqa: F401  (BLAS threads, if any, exist now)

    return [os.sched_getscheduler(int(tid)) for tid in os.listdir("/proc/self/task")]


def test_a_large_trace_waits_for_a_slot_then_runs(app_config):
    client = create_app({**app_config, "heavy_compute_cells": 1, "heavy_compute_concurrency": 1}).test_client()
    held, release = threading.Event(), threading.Event()

    def other_worker():
        with heavy.slot(1) as got:
            assert got
            held.set()
            release.wait(5)

    holder = threading.Thread(target=other_worker)
    holder.start()
    held.wait(5)
    threading.Timer(0.3, release.set).start()
    started = time.monotonic()
    response = client.post("/api/v1/attention", json=BODY)
    holder.join()
    assert response.status_code == 200 and time.monotonic() - started >= 0.3
    response.close()


def test_only_so_many_requests_wait_and_only_so_long(app_config):
    config = {**app_config, "heavy_compute_cells": 1, "heavy_compute_concurrency": 1}
    impatient = create_app({**config, "heavy_compute_wait_seconds": 0.2})
    crowded = create_app({**config, "heavy_compute_waiting": 1})
    with heavy.slot(1):
        started = time.monotonic()
        assert impatient.test_client().post("/api/v1/attention", json=BODY).status_code == 503
        assert 0.2 <= time.monotonic() - started < 2
        room = heavy.waiting_room(crowded)
        room.acquire()  # another request of this worker is already waiting
        try:
            started = time.monotonic()
            turned_away = crowded.test_client().post("/api/v1/attention", json=BODY)
        finally:
            room.release()
    assert turned_away.status_code == 503 and turned_away.headers["Retry-After"] == "1"
    assert time.monotonic() - started < 1  # at once, without waiting for a slot


def test_the_machine_keeps_a_core_for_requests_by_default(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    assert heavy.machine_slots(0) == 7 and heavy.machine_slots(3) == 3
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    assert heavy.machine_slots(0) == 1  # one core: large traces still run, in the background


@pytest.mark.parametrize(
    "body, compare",
    [
        ({"tokens": [[0.01] * 1024] * 64, "heads": 1}, False),  # 4 thousand score cells, 65 thousand activations
        ({"tokens": [[0.01] * 512] * 100, "heads": 1}, True),  # a comparison is two traces
    ],
)
def test_mid_size_requests_by_cost_leave_the_request_threads(app_config, monkeypatch, body, compare):
    from service.api.attention import offload as heavy
    from service.api.attention import views as attention

    app = create_app(app_config)
    calls = []
    original = heavy.run
    monkeypatch.setattr(attention.heavy, "run", lambda *a, **k: calls.append(a) or original(*a, **k))
    path = "/api/v1/attention/compare" if compare else "/api/v1/attention"
    response = app.test_client().post(path, json={**body, "failure_mode": "no_scaling"} if compare else body)
    assert response.status_code == 200 and len(calls) == 1
    response.close()


def test_the_workbench_case_stays_in_the_request_thread(app_config, monkeypatch):
    from service.api.attention import views as attention

    app = create_app(app_config)
    monkeypatch.setattr(
        attention.heavy, "run", lambda *a, **k: pytest.fail("the workbench case went to the background")
    )
    body = {"tokens": [[1.0, 0.5, -0.5, 1.0], [0.2, 1.0, 1.5, -0.3], [-1.0, 0.3, 0.8, 0.6]], "heads": 2}
    assert app.test_client().post("/api/v1/attention", json=body).status_code == 200


BAD_BODIES = [
    (b"", "application/json"),
    (b'{"tokens": [[1, 2], [3]], "heads": 1}', "application/json"),
    (b'{"tokens": [[1, NaN]], "heads": 1}', "application/json"),
    (b'{"tokens": [[1, true]], "heads": 1, "colour": "red"}', "application/json"),
    (b'{"tokens": [[1, 2]], "heads": 1, "failure_mode": "nope"}', "application/json"),
    (orjson.dumps({"tokens": [[0.5] * 8] * 200, "heads": 64}), "application/json"),  # over max_score_cells
    (b"[1, 2, 3]", "application/json"),
    (b'{"tokens": [[1, 2]], "heads": 1}', "text/plain"),
    (orjson.dumps({"tokens": [[1e200] * 4] * 3, "heads": 2}), "application/json"),  # overflows in the engine
]


@pytest.mark.parametrize("path", ["/api/v1/attention", "/api/v1/attention/compare"])
@pytest.mark.parametrize("data, mimetype", BAD_BODIES)
def test_a_body_parsed_in_the_background_gets_the_same_answer_as_one_parsed_here(app_config, path, data, mimetype):
    here = create_app(app_config).test_client().post(path, data=data, content_type=mimetype)
    away = (
        create_app({**app_config, "background_parse_bytes": 1})
        .test_client()
        .post(path, data=data, content_type=mimetype)
    )
    assert 400 <= here.status_code < 500
    assert (away.status_code, away.mimetype, away.json) == (here.status_code, here.mimetype, here.json)


@pytest.mark.parametrize("compare", [False, True])
def test_a_large_body_never_reaches_the_request_threads_parser(app_config, monkeypatch, compare):
    import service.edge

    body = {**BODY, "failure_mode": "no_scaling"} if compare else BODY
    path = "/api/v1/attention/compare" if compare else "/api/v1/attention"
    expected = orjson.loads(create_app(app_config).test_client().post(path, json=body).get_data())
    monkeypatch.setattr(service.edge, "parse_json", lambda data: pytest.fail("parsed in the request thread"))
    away = create_app({**app_config, "background_parse_bytes": 1}).test_client().post(path, json=body)
    assert away.status_code == 200 and orjson.loads(away.get_data()) == expected
    away.close()


def test_a_measured_body_is_computed_from_its_own_arguments_never_another_bodys(app, monkeypatch):
    from service.api.attention import offload as heavy_child

    settings = app.extensions["settings"]
    parses = []
    real_parse = heavy_child._parse

    def counted(raw, compare, s):
        parses.append(raw)
        return real_parse(raw, compare, s)

    monkeypatch.setattr(heavy_child, "_parse", counted)
    first = orjson.dumps(BODY)
    other = orjson.dumps({**BODY, "heads": 4})

    def computed(raw: bytes) -> dict:
        path, error = heavy_child.compute_to_file(None, None, False, None, raw, settings)
        assert error is None
        data = Path(path).read_bytes()
        os.unlink(path)
        return orjson.loads(data)

    heavy_child.measure(first, False, settings)
    assert computed(first)["shape"]["heads"] == 2 and len(parses) == 1  # parsed once for both steps
    heavy_child.measure(first, False, settings)
    assert computed(other)["shape"]["heads"] == 4 and len(parses) == 3  # another body: parsed afresh
    assert computed(first)["shape"]["heads"] == 2 and len(parses) == 4  # kept once only, never reused


HOST_SCRIPT = """
import sys, tempfile
sys.path.insert(0, {root!r})
import numpy as np
from service.db.migrate import upgrade
from service.app import create_app
url = "sqlite:///" + tempfile.mkdtemp() + "/wb.db"
upgrade(url)
app = create_app({{"database_url": url, "env": "testing", "ratelimit_enabled": False, "heavy_compute_cells": 1000}})
body = {{"tokens": np.random.default_rng(0).normal(size=(48, 8)).round(3).tolist(), "heads": 2}}
{body}
"""


@pytest.mark.parametrize("guarded", [False, True])
def test_a_host_script_gets_its_large_trace_with_or_without_a_main_guard(tmp_path, guarded):
    """A script that makes the app without an `if __name__ == "__main__":` guard cannot spawn the
    background process (the child would run the script again): large traces are then computed in
    the request's thread. Either way the answer comes, within bounded time (issue 31)."""
    ask = 'print(app.test_client().post("/api/v1/attention", json=body).status_code, flush=True)'
    body = f'if __name__ == "__main__":\n    {ask}' if guarded else ask
    script = tmp_path / "host.py"
    script.write_text(HOST_SCRIPT.format(root=str(ROOT), body=body))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["200"], done.stdout + done.stderr[-2000:]


def test_a_background_computation_that_does_not_finish_is_a_503_not_a_wait(app_config):
    from concurrent.futures import ThreadPoolExecutor

    app = create_app({**app_config, "heavy_compute_seconds": 0.5})
    started = time.monotonic()
    with ThreadPoolExecutor(1) as pool:
        with pytest.raises(heavy.Problem) as refused:
            heavy._bounded(pool.submit(time.sleep, 3), app.extensions["settings"])
        waited = time.monotonic() - started
    assert refused.value.status == 503 and "within 0.5 s" in refused.value.detail
    assert waited < 2  # the request did not wait for the computation


# Every other charged computation (issue 66, M3): a check's diagnosis, a challenge's verification, a model's
# lens, patch and speculation, each with the same answer when its cost is heavy.
CASE = {"tokens": [[1.0, 0.0, 0.5, -1.0], [0.0, 1.0, 1.0, 0.5], [1.0, 1.0, -0.5, 0.0]], "heads": 2, "causal": True}
HALF = [[[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.3, 0.3, 0.4]]] * 2
WRONG = {"weights": HALF, "head_outputs": [[[1.0, 0.0]] * 3] * 2, "concatenated": [[1.0, 0.0, 1.0, 0.0]] * 3}
ONLINE = {"tokens": [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], "causal": True, "block_q": 2, "block_k": 2}
OFFLOADED = [
    ("/api/v1/exercises/multi-head-attention/check", {"case": CASE, "output": WRONG}),
    ("/api/v1/exercises/online-softmax/check", {"case": ONLINE, "output": {"output": [[1, 0]] * 3, "lse": [0.7] * 3}}),
    ("/api/v1/models/bytes-2l-attn/lens", {"text": "x7Kp2Qx7Kp2Q", "top": 3}),
    (
        "/api/v1/models/bytes-2l-attn/patch",
        {
            "clean": "q8Lm3Zq8Lm3Z",
            "corrupted": "q8Lm3Zq8Lm3Y",
            "metric": {"kind": "logit_difference", "bytes": [90, 89]},
        },
    ),
    ("/api/v1/models/bytes-2l-attn/speculate", {"prompt": "def f(x):", "gamma": 2, "max_new_tokens": 8, "seed": 3}),
]


@pytest.mark.parametrize(("path", "body"), OFFLOADED)
def test_every_charged_computation_runs_in_the_background_when_heavy_and_answers_the_same(
    app_config, monkeypatch, path, body
):
    direct = create_app(app_config).test_client().post(path, json=body)
    ran: list[str] = []
    real = heavy.in_background
    monkeypatch.setattr(heavy, "in_background", lambda fn, *a: ran.append(fn.__name__) or real(fn, *a))
    offloaded = create_app({**app_config, "heavy_compute_cells": 1}).test_client().post(path, json=body)
    assert direct.status_code == offloaded.status_code == 200, offloaded.get_data()[:300]
    assert len(ran) == 1  # in the background process (the pool runs in tests, as served)
    assert orjson.loads(offloaded.get_data()) == orjson.loads(direct.get_data())


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        (
            "/api/v1/exercises/multi-head-attention/check",
            {"case": CASE, "output": {**WRONG, "weights": [[[1.0]]]}},
            "output.weights",
        ),
        (
            "/api/v1/models/bytes-2l-attn/patch",
            {"clean": "q8Lm3Z", "corrupted": "q8Lm3", "metric": {"kind": "logit_difference", "bytes": [90, 89]}},
            "corrupted",
        ),
    ],
)
def test_what_the_background_refuses_is_said_as_the_request_thread_says_it(app_config, path, body, field):
    direct = create_app(app_config).test_client().post(path, json=body)
    offloaded = create_app({**app_config, "heavy_compute_cells": 1}).test_client().post(path, json=body)
    assert direct.status_code == offloaded.status_code and direct.status_code in (413, 422)
    assert offloaded.json == direct.json and any(name.startswith(field) for name in offloaded.json["errors"])


def test_the_engines_and_the_models_refusals_cross_the_process_boundary_whole():
    import pickle

    from service.compute import AttentionInputError
    from service.models.present import ModelRequestError

    engine = pickle.loads(pickle.dumps(AttentionInputError("weights is 1 x 1", field="output.weights")))
    assert (str(engine), engine.field) == ("weights is 1 x 1", "output.weights")
    refused = ModelRequestError(413, "at most %(n)s bytes", {"n": 128}, field="clean", limits={"context": 128})
    model = pickle.loads(pickle.dumps(refused))
    assert (model.status, model.message, model.values, model.field, model.limits, str(model)) == (
        413,
        "at most %(n)s bytes",
        {"n": 128},
        "clean",
        {"context": 128},
        "at most 128 bytes",
    )


CHURNING_HOST = """
import sys, threading, time
sys.path.insert(0, {root!r})
from service.api.attention.allocator import become_background
stop = threading.Event()
def churn():
    while not stop.is_set():  # short-lived threads all the time, as a rate limiter's timers are
        t = threading.Thread(target=time.sleep, args=(0.0005,))
        t.start()
        t.join()
for _ in range(3):
    threading.Thread(target=churn, daemon=True).start()
for _ in range(5000):
    become_background()
stop.set()
print("idle", flush=True)
"""


def test_a_compute_process_starts_while_its_threads_come_and_go(tmp_path):
    """The background process lowers every thread it has; one that ends meanwhile is skipped, never an error
    (a host script's app, re-run in the child, starts a rate limiter's timers there: the pool then broke)."""
    script = tmp_path / "churn.py"
    script.write_text(CHURNING_HOST.format(root=str(ROOT)))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["idle"], done.stderr[-2000:]
