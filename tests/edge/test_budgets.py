"""Compute budgets: a client that spends its cells waits (429), a worker that spends its cells
sheds the larger requests (503), and a learner's workbench requests and events never notice."""

import os
import time

import numpy as np
import pytest

from service.app import create_app
from service.config import ConfigError, Settings

from ..api.helpers import event
from .test_limits import key_for

REDIS = os.environ.get("WORKBENCH_TEST_REDIS_URL", "")

# Small caps, so a budget that holds one maximum-size comparison is small too:
# the largest comparison costs 2 * (1024 + 16 * 16) = 2560 cells.
CAPS = {"max_tokens": 16, "max_d_model": 16, "max_heads": 4, "max_score_cells": 1024, "compute_free_cells": 100}
MID = {"tokens": np.random.default_rng(0).standard_normal((16, 16)).round(3).tolist(), "heads": 4}  # 4*16*16 + 16*16
MID_CELLS = 4 * 16 * 16 + 16 * 16  # 1280: charged
WORKBENCH = {"tokens": [[1, 0, 0, 0], [0, 1, 0, 0], [1, 1, 0, 0]], "heads": 2}  # 2*9 + 12 = 30 cells: free


def budget_app(app_config, client="6000/minute", worker="100000/minute", **extra):
    clear_of_a_window_boundary()  # each test counts within one window: it starts clear of the next
    return create_app(
        {
            **app_config,
            **CAPS,
            "ratelimit_enabled": True,
            "ratelimit_key": "1000/minute",
            "ratelimit_learner": "1000/minute",
            "compute_budget_client": client,
            "compute_budget_worker": worker,
            **extra,
        }
    )


def clear_of_a_window_boundary(margin: float = 5.0) -> None:
    """Compute budgets count in fixed windows of a minute (service/edge/limits.py): a test that counts what a
    window allows starts at least `margin` seconds before the next one opens, or a reset mid-test refills it."""
    left = 60.0 - time.time() % 60.0
    if left < margin:
        time.sleep(left + 0.5)


def spend(client, headers, times, body=MID, path="/api/v1/attention"):
    return [client.post(path, json=body, headers=headers).status_code for _ in range(times)]


def test_a_client_past_its_compute_budget_waits_while_others_compute(app_config):
    app = budget_app(app_config)
    client = app.test_client()
    acme, globex = key_for(app, "acme"), key_for(app, "globex")
    assert spend(client, acme, 5) == [200, 200, 200, 200, 429]  # 4 x 1280 fit in 6000, the fifth does not
    refused = client.post("/api/v1/attention", json=MID, headers=acme)
    assert refused.status_code == 429 and refused.mimetype == "application/problem+json"
    assert refused.json["type"].endswith("/compute-budget") and f"{MID_CELLS:,} cells" in refused.json["detail"]
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    assert spend(client, globex, 1) == [200]  # another platform's budget is its own
    assert spend(client, acme, 3, body=WORKBENCH) == [200, 200, 200]  # small requests are never charged
    assert client.post("/api/v1/events", json=event(), headers=acme).status_code == 201


def test_a_comparison_costs_two_traces(app_config):
    app = budget_app(app_config)
    client, acme = app.test_client(), key_for(app)
    compare = {**MID, "failure_mode": "reuse_first_slice"}
    assert spend(client, acme, 3, body=compare, path="/api/v1/attention/compare") == [200, 200, 429]


def test_a_worker_past_its_budget_sheds_large_requests_from_every_client_but_not_small_ones(app_config):
    app = budget_app(app_config, worker="6000/minute")
    client = app.test_client()
    platforms = [key_for(app, name) for name in ("acme", "globex", "initech")]
    statuses = [status for headers in platforms for status in spend(client, headers, 2)]
    # each client within its own budget, the worker not: the first two have half of it, the third
    # its fair share of the rest (the worker over the clients that used it, plus one yet to come)
    assert statuses == [200, 200, 200, 503, 200, 503]
    shed = client.post("/api/v1/attention", json=MID, headers=platforms[2])
    assert shed.json["type"].endswith("/busy") and 1 <= int(shed.headers["Retry-After"]) <= 60
    assert spend(client, platforms[2], 2, body=WORKBENCH) == [200, 200]
    assert client.post("/api/v1/events", json=event(), headers=platforms[2]).status_code == 201


def test_browser_learners_and_anonymous_callers_have_budgets_too(app_config):
    app = budget_app(app_config)
    learner, anonymous = app.test_client(), app.test_client()
    learner.post("/api/v1/session")
    assert spend(learner, {}, 5) == [200, 200, 200, 200, 429]
    assert spend(anonymous, {}, 5) == [200, 200, 200, 200, 429]  # by address: a different bucket


def test_with_the_store_unreachable_budgets_are_kept_per_worker(app_config):
    from service.observability import RATELIMIT_STORAGE_TROUBLE

    before = RATELIMIT_STORAGE_TROUBLE._value.get()
    app = budget_app(app_config, ratelimit_storage_uri="redis://127.0.0.1:9/0")  # nothing listens on port 9
    client, acme = app.test_client(), key_for(app)
    assert spend(client, acme, 5) == [200, 200, 200, 200, 429]
    assert RATELIMIT_STORAGE_TROUBLE._value.get() > before


@pytest.mark.skipif(not REDIS, reason="shared budgets need WORKBENCH_TEST_REDIS_URL (set by .ci/run)")
def test_a_client_budget_is_shared_by_every_worker(app_config):
    import redis

    redis.Redis.from_url(REDIS).flushdb()
    first, second = (budget_app(app_config, ratelimit_storage_uri=REDIS) for _ in range(2))
    headers = key_for(first)
    assert spend(first.test_client(), headers, 2) + spend(second.test_client(), headers, 3) == [200] * 4 + [429]


def test_rate_limits_off_means_no_budgets_either(app_config):
    app = create_app({**app_config, **CAPS, "compute_budget_client": "3000/minute"})
    assert spend(app.test_client(), {}, 5) == [200] * 5


@pytest.mark.parametrize("name", ["compute_budget_client", "compute_budget_worker"])
def test_a_budget_must_hold_one_maximum_size_comparison(name):
    with pytest.raises(ConfigError, match="2,559 cells|2,560 cells"):
        Settings.load({**CAPS, name: "2559/minute"}, environ={})
    Settings.load({**CAPS, name: "2560/minute"}, environ={})
    with pytest.raises(ConfigError, match="must read like"):
        Settings.load({name: "plenty"}, environ={})


# Budgets count people, not sessions (issue 31): each of these failed on the main of 2026-12-01.


def test_minting_sessions_buys_no_compute_every_session_of_an_address_shares_its_budget(app_config):
    app = budget_app(app_config, client="6000/minute", compute_budget_address="12000/minute")
    statuses = []
    for _ in range(12):  # a fresh session for every request, all from one address
        minted = app.test_client()
        minted.post("/api/v1/session", environ_base={"REMOTE_ADDR": "203.0.113.7"})
        statuses += [
            minted.post("/api/v1/attention", json=MID, environ_base={"REMOTE_ADDR": "203.0.113.7"}).status_code
        ]
    assert statuses.count(200) == 12000 // MID_CELLS and set(statuses[12000 // MID_CELLS :]) == {429}
    refused = app.test_client()
    refused.post("/api/v1/session", environ_base={"REMOTE_ADDR": "203.0.113.7"})
    answer = refused.post("/api/v1/attention", json=MID, environ_base={"REMOTE_ADDR": "203.0.113.7"})
    assert "network address" in answer.json["detail"]
    other = app.test_client()  # a learner elsewhere computes as before
    other.post("/api/v1/session", environ_base={"REMOTE_ADDR": "198.51.100.2"})
    assert other.post("/api/v1/attention", json=MID, environ_base={"REMOTE_ADDR": "198.51.100.2"}).status_code == 200


def test_an_address_starts_only_so_many_sessions_an_hour(app_config):
    app = budget_app(app_config, session_mint_limit="3/hour")
    here = {"REMOTE_ADDR": "203.0.113.8"}
    made = [app.test_client().post("/api/v1/session", environ_base=here).status_code for _ in range(4)]
    assert made == [201, 201, 201, 429]
    returning = app.test_client()
    assert returning.post("/api/v1/session", environ_base={"REMOTE_ADDR": "198.51.100.3"}).status_code == 201
    assert returning.post("/api/v1/session", environ_base={"REMOTE_ADDR": "198.51.100.3"}).status_code == 200


def test_a_diagnosis_is_charged_for_every_trace_it_tries(app_config):
    from service.exercise.diagnose import traces_per_diagnosis

    app = budget_app(app_config, client="100000/minute", worker="1000000/minute")  # a lone client: half the worker
    client, acme = app.test_client(), key_for(app)
    tokens = np.random.default_rng(1).standard_normal((8, 8)).round(3).tolist()
    weights = np.full((2, 8, 8), 1 / 8).tolist()
    body = {"case": {"tokens": tokens, "heads": 2, "causal": True}, "output": {"weights": weights}}
    per_check = (2 * 8 * 8 + 8 * 8) * traces_per_diagnosis(True, False)
    statuses = [
        client.post("/api/v1/exercises/multi-head-attention/check", json=body, headers=acme).status_code
        for _ in range(100000 // per_check + 1)
    ]
    assert statuses[:-1] == [200] * (100000 // per_check) and statuses[-1] == 429


def test_a_challenge_takes_only_so_many_answers(app_config):
    from service.api.challenges import ATTEMPTS

    big = "100000000/minute"
    app = budget_app(app_config, client=big, worker=big, compute_budget_address=big)
    learner = app.test_client()
    learner.post("/api/v1/session")
    challenge = learner.post("/api/v1/exercises/multi-head-attention/challenges", json={}).json
    wrong = [
        {
            "weights": np.zeros((c["heads"], len(c["tokens"]), len(c["tokens"]))).tolist(),
            "head_outputs": np.zeros((c["heads"], len(c["tokens"]), len(c["tokens"][0]) // c["heads"])).tolist(),
            "concatenated": np.zeros((len(c["tokens"]), len(c["tokens"][0]))).tolist(),
            "output": np.zeros((len(c["tokens"]), len(c["tokens"][0]))).tolist(),
        }
        for c in challenge["cases"]
    ]
    statuses = [
        learner.post(challenge["answers_url"], json={"answers": wrong}).status_code for _ in range(ATTEMPTS + 1)
    ]
    assert statuses == [200] * ATTEMPTS + [429]


def from_address(client, address):
    client.environ_base["REMOTE_ADDR"] = address
    return client


def test_one_network_flooding_from_eight_addresses_leaves_another_learner_their_share(app_config):
    """The finding: eight addresses flooding compute took another learner's requests to 503. The
    worker's budget is shared by network: the eight (one /24) take half of it between them, and a
    learner elsewhere, arriving after the flood took its part, still computes."""
    app = budget_app(
        app_config, client="100000/minute", worker=f"{20 * MID_CELLS}/minute", compute_budget_address="100000/minute"
    )
    flooders = [from_address(app.test_client(), f"10.0.0.{i}") for i in range(2, 10)]
    flooded = [status for _ in range(5) for c in flooders for status in spend(c, {}, 1)]
    assert flooded.count(200) == 10 and set(flooded) == {200, 503}  # half of the worker, then refused
    learner = from_address(app.test_client(), "192.0.2.7")
    learner.post("/api/v1/session")
    assert spend(learner, {}, 5) == [200] * 5  # its share (a third of the worker: 6 requests) is its own
    assert all(s == 503 for c in flooders for s in spend(c, {}, 1))


def test_a_request_refused_after_it_was_charged_is_refunded(app_config, monkeypatch):
    """The finding: flood requests were charged and then refused (no slot for a large trace), so
    refused work spent the budgets. Now a 503 gives its cells back to the client and the worker."""
    from contextlib import contextmanager

    @contextmanager
    def no_slot(count, wait=0.0):
        yield False  # every slot taken: "no large-trace slot came free"

    app = budget_app(
        app_config, client=f"{4 * MID_CELLS}/minute", worker=f"{8 * MID_CELLS}/minute", heavy_compute_cells=1000
    )
    client, acme = app.test_client(), key_for(app)
    monkeypatch.setattr("service.api.attention.offload.slot", no_slot)
    assert spend(client, acme, 10) == [503] * 10  # refused after the charge: each refunded
    monkeypatch.undo()
    assert spend(client, acme, 5) == [200, 200, 200, 200, 429]  # the whole budget is still there


def test_a_request_over_one_budget_is_charged_to_none(app_config):
    """Every budget is tested before any is charged: a browser session refused by its own budget
    spends nothing of its address's, which the address's other sessions still have."""
    app = budget_app(
        app_config,
        client=f"{3 * MID_CELLS}/minute",
        worker=f"{100 * MID_CELLS}/minute",
        compute_budget_address=f"{6 * MID_CELLS}/minute",
    )
    first, second = (from_address(app.test_client(), "198.51.100.4") for _ in range(2))
    first.post("/api/v1/session")
    second.post("/api/v1/session")
    assert spend(first, {}, 8) == [200] * 3 + [429] * 5  # its own budget, then refused
    assert spend(second, {}, 3) == [200] * 3  # the address's other half is there
    assert spend(second, {}, 1) == [429]


def test_a_network_past_its_share_is_refused_before_its_large_bodies_are_read(app_config):
    """Refusing costs the server nothing to parse: a large body from a network past its fair share
    is a 503 unread (even one that is not JSON), while a small one is still read and answered."""
    app = budget_app(
        app_config, client="100000/minute", worker=f"{4 * MID_CELLS}/minute", compute_budget_address="100000/minute"
    )
    flooder = from_address(app.test_client(), "10.0.0.2")
    assert spend(flooder, {}, 3) == [200, 200, 503]  # half the worker, then its share is spent
    garbage = b"[" + b"1," * 20000  # 40 KB, not JSON
    refused = flooder.post("/api/v1/attention", data=garbage, content_type="application/json")
    assert refused.status_code == 503 and refused.json["type"].endswith("/busy")
    assert flooder.post("/api/v1/attention", data=b"[1,", content_type="application/json").status_code == 400
    assert spend(flooder, {}, 1, body=WORKBENCH) == [200]  # free: never charged, never refused


CHECK_OUTPUT = {"weights": [[[1.0]]], "head_outputs": [[[1.0]]], "concatenated": [[1.0]]}
# A small body of each route that charges cells, and a budget that holds it twice but not three times
# (attention measures a padded body in the background, the decode in the request thread that parses it
# anyway, each at its real cost: 2,336 cells the decode); the routes that cannot measure one charge the most
# a request of theirs may cost, which the budget cannot hold with it.
PADDED_ROUTES = {
    "/api/v1/attention": (MID, "3000/minute"),
    "/api/v1/attention/compare": ({**MID, "failure_mode": "no_scaling"}, "6000/minute"),
    "/api/v1/attention/decode": ({"tokens": MID["tokens"][:8], "heads": 4}, "6000/minute"),
    "/api/v1/exercises/multi-head-attention/check": (
        {"case": {"tokens": [[1.0]], "heads": 1}, "output": CHECK_OUTPUT},
        "12000/minute",
    ),
}


@pytest.mark.parametrize("path", sorted(PADDED_ROUTES))
def test_a_body_padded_past_what_the_edge_parses_is_charged(app_config, path):
    """A 270 KB body of which 269 KB is white space is not parsed in a request thread; it was charged
    nothing, and eight networks of them kept every other learner waiting. Now each route charges it:
    attention what it measures in the background, the decode what it measures in the thread that parses
    it anyway, the others the most they may cost."""
    import json

    body, budget = PADDED_ROUTES[path]
    app = budget_app(app_config, client=budget)
    client, acme = app.test_client(), key_for(app)
    headers = {**acme, "Content-Type": "application/json"}
    small = json.dumps(body)
    assert client.post(path, data=small, headers=headers).status_code == 200
    padded = small[:-1] + " " * 270_000 + "}"
    assert len(padded) > app.extensions["settings"].background_parse_bytes
    first = client.post(path, data=padded, headers=headers)
    after = client.post(path, data=small, headers=headers)
    charged = [first.status_code, after.status_code]
    assert 429 in charged, (path, charged)  # the padded one was refused, or spent what the next one needed
    refused = first if first.status_code == 429 else after
    assert refused.json["type"].endswith("/compute-budget")
