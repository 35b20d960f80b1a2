"""POST /attention/tiled: the online softmax on a platform's own numbers, tile by tile, against the loop
written out for the tests; its caps, its refusals and where a failure mode first parts."""

import math

import numpy as np
import pytest

from ...compute.plain_python import reference_mha, reference_tiles, sees

pytestmark = pytest.mark.usefixtures("app")

RNG = np.random.default_rng(51)
X = RNG.normal(size=(6, 8)).round(3)
W = {name: (RNG.normal(size=(8, 8)) / 2).round(3) for name in ("query", "key", "value")}


def post(client, body, status=200):
    response = client.post("/api/v1/attention/tiled", json=body)
    assert response.status_code == status, response.json
    return response.json


def expected(block_q, block_k, slip=None, **long):
    plain = reference_mha(
        X.tolist(), 2, w_q=W["query"].tolist(), w_k=W["key"].tolist(), w_v=W["value"].tolist(), **long
    )
    visible = [[sees(i, j, True, long.get("window"), long.get("sinks", 0)) for j in range(6)] for i in range(6)]
    sink = long.get("sink_logit")
    return plain, [
        reference_tiles(
            plain["scores"][h], plain["value"][h], visible, block_q, block_k, slip, None if sink is None else sink[h]
        )
        for h in range(2)
    ]


def body(**more):
    return {"tokens": X.tolist(), "heads": 2, "projections": {k: v.tolist() for k, v in W.items()}, **more}


def test_every_tile_s_running_values_and_the_outputs_are_the_loop_s(client):
    answer = post(client, body(block_q=4, block_k=2))
    plain, tiles = expected(4, 2)
    assert answer["tiles"] == {"computed": 2 * 3 - 1, "masked": 3, "skipped": 1}
    assert answer["memory"] == {"tiled": 4 * 2 + 2 * 4, "plain": 36}
    assert answer["max_difference_from_plain"] <= 1e-14 and answer["first_difference"] is None
    for h, head in enumerate(answer["heads"]):
        np.testing.assert_allclose(head["output"], plain["head_outputs"][h], rtol=0, atol=1e-13)
        np.testing.assert_allclose(head["lse"], tiles[h]["lse"], rtol=0, atol=1e-13)
        for tile, want in zip(head["tiles"], tiles[h]["tiles"], strict=True):
            assert (tile["status"], tile["rows"], tile["keys"]) == (want["status"], [*want["rows"]], [*want["keys"]])
            for name in ("m", "alpha", "l", "o_tilde"):
                if want["status"] == "skipped":
                    assert tile[name] is None
                else:
                    np.testing.assert_allclose(tile[name], want[name], rtol=0, atol=1e-12, err_msg=name)


def test_a_window_with_a_sink_logit_reports_rows_that_have_seen_nothing_yet_as_null(client):
    long = {"window": 2, "sink_logit": [0.0, 1.0]}
    answer = post(client, body(block_q=3, block_k=3, **long))
    plain, tiles = expected(3, 3, **long)
    for h, head in enumerate(answer["heads"]):
        np.testing.assert_allclose(head["output"], plain["head_outputs"][h], rtol=0, atol=1e-13)
        assert set(head["sink"]) == {"m", "alpha", "l", "share"}
        # the sink's share of each row and the visible weights' sum sigmoid(L - z) make one (issue 65, C5)
        z = long["sink_logit"][h]
        visible = 1.0 / (1.0 + np.exp(z - np.array([-np.inf if v is None else v for v in head["lse"]])))
        np.testing.assert_allclose(np.array(head["sink"]["share"]) + visible, 1.0, rtol=0, atol=1e-13)
    # rows 3-5 over keys 0-2: row 3 sees key 2, rows 4 and 5 nothing yet (m null, not -inf in the JSON)
    tile = answer["heads"][0]["tiles"][2]
    assert (tile["status"], tile["m"][1:], tile["l"][1:]) == ("masked", [None, None], [0.0, 0.0])


@pytest.mark.parametrize("slip", ["online_no_rescale", "online_max_not_carried", "online_diagonal_skipped"])
def test_a_failure_mode_answers_the_broken_numbers_and_where_they_first_part(client, slip):
    answer = post(client, body(block_q=2, block_k=2, failure_mode=slip, precision=6))
    _, tiles = expected(2, 2, slip)
    assert answer["failure_mode"]["id"] == slip and answer["failure_mode"]["name"]
    for h, head in enumerate(answer["heads"]):
        np.testing.assert_allclose(head["output"], tiles[h]["output"], rtol=0, atol=1e-6)
    first = answer["first_difference"]
    assert set(first) == {"head", "tile", "query_block", "key_block", "stage"} and first["stage"]
    assert answer["max_difference_from_plain"] > 1e-3
    if slip == "online_diagonal_skipped":
        assert first == {"head": 0, "tile": 0, "query_block": 0, "key_block": 0, "stage": "status"}


@pytest.mark.parametrize(
    "more,field",
    [
        ({"block_q": 7, "block_k": 1}, "block_q"),  # n = 6
        ({"block_q": 0, "block_k": 1}, "block_q"),
        ({"block_q": 1}, "block_k"),
        ({"block_q": 1, "block_k": 1, "failure_mode": "no_scaling"}, "failure_mode"),  # a pass's, not the tiles'
        ({"block_q": 1, "block_k": 1, "include": ["weights"]}, "include"),
        ({"block_q": 1, "block_k": 2**53, "window": 2}, "block_k"),
    ],
)
def test_a_block_out_of_range_or_a_pass_s_failure_mode_is_a_422_naming_the_field(client, more, field):
    answer = post(client, body(**more), 422)
    assert field in answer["errors"], answer
    if field in more and field.startswith("block") and more[field] < 2**53:  # one bound, said alike for 0 and n + 1
        assert "from 1 to n" in answer["errors"][field][0] and "1048576" not in str(answer), answer


def test_a_request_over_the_tile_caps_is_a_413_naming_the_cap_before_anything_is_computed(client):
    many = {"tokens": np.zeros((64, 4)).tolist(), "heads": 2, "block_q": 1, "block_k": 1}  # 2 * 64 * 64 tiles
    answer = post(client, many, 413)
    assert answer["limits"] == {"max_tiles": 4096} and "block_k" in answer["errors"]
    wide = {"tokens": np.zeros((256, 1024)).tolist(), "heads": 1, "block_q": 256, "block_k": 64}
    answer = post(client, wide, 413)  # 4 tiles, but each holds 256 rows of 1,027 numbers
    assert answer["limits"] == {"max_tiled_cells": 1024 * 1024}


def test_the_registry_marks_the_tiles_failure_modes_and_the_workbench_s_pass_refuses_them(client):
    modes = {m["id"]: m for m in client.get("/api/v1/failure-modes").json["failure_modes"]}
    assert {m for m, v in modes.items() if v["tiled"]} == {
        "online_no_rescale",
        "online_max_not_carried",
        "online_diagonal_skipped",
    }
    assert all(not v["engine"] for v in modes.values() if v["tiled"])
    answer = client.post(
        "/api/v1/attention", json={"tokens": X.tolist(), "heads": 2, "failure_mode": "online_no_rescale"}
    )
    assert answer.status_code == 422 and "failure_mode" in answer.json["errors"]


def test_the_log_sum_exp_is_finite_where_exp_alone_overflows(client):
    big = {"tokens": (X * 60).round(3).tolist(), "heads": 2, "block_q": 2, "block_k": 1}
    answer = post(client, big)
    scores = reference_mha((X * 60).round(3).tolist(), 2)["scores"]
    for h, head in enumerate(answer["heads"]):
        for i, lse in enumerate(head["lse"]):
            row = scores[h][i][: i + 1]
            top = max(row)
            assert math.isclose(lse, top + math.log(math.fsum(math.exp(s - top) for s in row)), rel_tol=1e-14)
    assert max(max(row) for row in scores[0]) > 709  # exp alone would overflow
