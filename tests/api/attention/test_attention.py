"""POST /attention and /attention/compare: the numbers equal the plain-loop reference."""

import math

import numpy as np
import pytest

from service.compute import FAILURE_MODES

from ...compute.plain_python import LONG_CONTEXT_SLIPS, ROPE_SLIPS, reference_mha, slip_context

pytestmark = pytest.mark.usefixtures("app")

RNG = np.random.default_rng(2024)
X = RNG.normal(size=(4, 8)).round(3)
W = {name: RNG.normal(size=(8, 8)).round(3) for name in ("query", "key", "value", "output")}


def post(client, body, path="/api/v1/attention"):
    response = client.post(path, json=body)
    assert response.status_code == 200, response.json
    assert response.mimetype == "application/json"
    return response.json


def assert_matches(body, ref):
    for h, head in enumerate(body["heads"]):
        for part, ref_part in (
            ("query", "query"),
            ("key", "key"),
            ("value", "value"),
            ("scores", "scores"),
            ("weights", "weights"),
            ("output", "head_outputs"),
        ):
            np.testing.assert_allclose(head[part], ref[ref_part][h], rtol=0, atol=1e-12, err_msg=f"{h} {part}")
    for part in ("concat", "output", "residual"):
        np.testing.assert_allclose(body[part], ref[part], rtol=0, atol=1e-12, err_msg=part)


OPTIONS = [
    pytest.param({}, {}, id="defaults"),
    pytest.param({"causal": False}, {"causal": False}, id="no-mask"),
    pytest.param(
        {"projections": W},
        {"w_q": W["query"], "w_k": W["key"], "w_v": W["value"], "w_o": W["output"]},
        id="projections",
    ),
    pytest.param(
        {"heads": 4, "kv_heads": 2, "projections": {"key": W["key"][:, :4], "value": W["value"][:, :4]}},
        {"heads": 4, "kv_heads": 2, "w_k": W["key"][:, :4], "w_v": W["value"][:, :4]},
        id="gqa",
    ),
    pytest.param({"rope": {"style": "half"}}, {"rope": {"style": "half"}}, id="rope-half"),
    pytest.param(
        {"rope": {"style": "interleaved", "base": 100.0}},
        {"rope": {"style": "interleaved", "base": 100.0}},
        id="rope-interleaved",
    ),
    *[
        pytest.param(
            {"rope": {"style": style, "scaling": scaling, "offset": 5000}},
            {"rope": {"style": style, "scaling": scaling, "offset": 5000}},
            id=f"rope-{scaling['rope_type']}-{style}-offset",
        )
        for style, scaling in zip(("half", "interleaved"), dict(ROPE_SLIPS).values(), strict=False)
    ],
    *[
        pytest.param(
            {"failure_mode": m, "projections": W, **slip_context(m, 2)},
            {
                "failure_mode": m,
                "w_q": W["query"],
                "w_k": W["key"],
                "w_v": W["value"],
                "w_o": W["output"],
                **slip_context(m, 2),
            },
            id=m,
        )
        for m in sorted(set(FAILURE_MODES) - set(LONG_CONTEXT_SLIPS))  # those: test_long_context_answers
    ],
]


@pytest.mark.parametrize("options, ref_options", OPTIONS)
def test_every_option_matches_the_loop_reference(client, options, ref_options):
    body = {"tokens": X.tolist(), "heads": 2, **_jsonable(options)}
    ref_kwargs = {"heads": 2, **ref_options}
    heads = ref_kwargs.pop("heads")
    ref = reference_mha(
        X.tolist(), heads, **{k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in ref_kwargs.items()}
    )
    assert_matches(post(client, body), ref)


def _jsonable(obj):
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    return obj


def test_response_describes_shape_features_and_conventions(client):
    body = post(client, {"tokens": [[1, 2, 10, 20]], "heads": 2})
    assert body["shape"] == {"n": 1, "d_model": 4, "heads": 2, "d_head": 2, "kv_heads": 2}
    assert [h["features"] for h in body["heads"]] == [[0, 2], [2, 4]]
    assert body["heads"][0]["query"] == [[1, 2]] and body["heads"][1]["query"] == [[10, 20]]
    assert body["concat"] == [[1, 2, 10, 20]]
    conventions = body["conventions"]
    assert conventions["dtype"] == "float64"
    assert "sqrt(d_head) = sqrt(2)" in conventions["scale"]
    assert "-inf before the softmax" in conventions["mask"]
    assert conventions["rope"] is None and conventions["failure_mode"] is None


def test_masked_scores_are_null_exactly_where_masked(client):
    body = post(client, {"tokens": X.tolist(), "heads": 2})
    for head in body["heads"]:
        for i, row in enumerate(head["masked_scores"]):
            assert row[: i + 1] == head["scores"][i][: i + 1]
            assert row[i + 1 :] == [None] * (len(row) - i - 1)


def test_summary_matches_the_weights(client):
    body = post(client, {"tokens": X.tolist(), "heads": 2, "causal": False})
    for head in body["heads"]:
        w = np.array(head["weights"])
        summary = head["summary"]
        assert summary["argmax"] == w.argmax(axis=1).tolist()
        np.testing.assert_allclose(summary["max_weight"], w.max(axis=1))
        np.testing.assert_allclose(summary["row_entropy"], [-sum(p * np.log(p) for p in row if p > 0) for row in w])
        np.testing.assert_allclose(summary["column_mass"], w.mean(axis=0))
        assert abs(sum(summary["column_mass"]) - 1) < 1e-12


def test_a_row_that_sees_one_key_has_entropy_zero_not_negative_zero(client):
    body = post(client, {"tokens": X.tolist(), "heads": 2})  # causal: the first row sees only itself
    for head in body["heads"]:
        first = head["summary"]["row_entropy"][0]
        assert first == 0 and math.copysign(1.0, first) == 1.0  # JSON 0.0, not -0.0


def test_include_and_precision_shape_the_response(client):
    body = post(client, {"tokens": X.tolist(), "heads": 2, "include": ["weights", "concat"], "precision": 3})
    assert set(body) == {"shape", "conventions", "cache", "heads", "concat"}
    assert set(body["heads"][0]) == {"index", "features", "feature_indices", "kv_head", "weights"}
    full = post(client, {"tokens": X.tolist(), "heads": 2})
    np.testing.assert_allclose(body["heads"][1]["weights"], np.round(full["heads"][1]["weights"], 3))
    assert body["concat"] and all(len(repr(v).split(".")[-1]) <= 3 for row in body["concat"] for v in row)


def test_include_distinguishes_head_outputs_from_the_final_output(client):
    body = post(client, {"tokens": X.tolist(), "heads": 2, "include": ["heads.output"]})
    assert "output" in body["heads"][0] and "output" not in body
    body = post(client, {"tokens": X.tolist(), "heads": 2, "include": ["output"]})
    assert "output" in body and "output" not in body["heads"][0]


@pytest.mark.parametrize("mode", sorted(FAILURE_MODES))
def test_compare_returns_both_and_their_differences(client, mode):
    body = {
        "tokens": X.tolist(),
        "heads": 2,
        "projections": _jsonable(W),
        "failure_mode": mode,
        **slip_context(mode, 2, 4),
    }
    result = post(client, body, "/api/v1/attention/compare")
    correct = post(client, {k: v for k, v in body.items() if k != "failure_mode"})
    broken = post(client, body)
    assert result["failure_mode"]["id"] == mode and result["failure_mode"]["description"]
    np.testing.assert_array_equal(result["correct"]["output"], correct["output"])
    np.testing.assert_array_equal(result["broken"]["output"], broken["output"])
    expected = np.array(broken["concat"]) - np.array(correct["concat"])
    np.testing.assert_allclose(result["differences"]["concat"], expected, atol=1e-15)
    weights_diff = np.array([h["weights"] for h in broken["heads"]]) - np.array(
        [h["weights"] for h in correct["heads"]]
    )
    np.testing.assert_allclose(result["differences"]["weights"], weights_diff, atol=1e-15)
    assert result["differences"]["max_abs"]["output"] == pytest.approx(
        np.abs(np.array(broken["output"]) - np.array(correct["output"])).max()
    )


def test_compare_requires_a_failure_mode(client):
    response = client.post("/api/v1/attention/compare", json={"tokens": X.tolist(), "heads": 2})
    assert response.status_code == 422
    assert "failure_mode" in response.json["errors"]


def test_a_comparison_marks_each_head_only_where_its_numbers_differ(client):
    """For every failure mode a comparison can show: a head's stage is named diverging exactly
    when that head's numbers differ between the two traces in the answer (compared here, cell by
    cell), an identical head has none, and the first difference is the first differing stage in
    pipeline order over every head, with its head."""
    rng = np.random.default_rng(5)
    modes = [
        m["id"] for m in client.get("/api/v1/failure-modes").json["failure_modes"] if m["engine"] and not m["decoding"]
    ]
    names = {"q": "query", "k": "key", "v": "value", "scores": "scores", "weights": "weights", "head-output": "output"}
    order = ["q", "k", "v", "scores", "weights", "head-output"]
    for mode in modes:
        body = {
            "tokens": rng.normal(size=(4, 4)).round(3).tolist(),
            "heads": 2,
            "causal": True,
            "failure_mode": mode,
            **slip_context(mode, 2),
        }
        if mode == "gqa_tiled":
            body = {**body, "heads": 4, "tokens": rng.normal(size=(4, 8)).round(3).tolist(), "kv_heads": 2}
        result = client.post("/api/v1/attention/compare", json=body).json
        correct, broken, found = result["correct"]["heads"], result["broken"]["heads"], result["divergence"]
        expected = [
            [
                s
                for s in order
                if not np.allclose(
                    np.array(correct[h][names[s]], dtype=float),
                    np.array(broken[h][names[s]], dtype=float),
                    rtol=1e-9,
                    atol=1e-9,
                )
            ]
            for h in range(len(correct))
        ]
        assert [x["stages"] for x in found["heads"]] == expected, mode
        assert {s for stages in expected for s in stages} == set(found["stages"]) & set(order), mode
        if found["first"] in order:
            assert found["first_head"] == next(h for h, stages in enumerate(expected) if found["first"] in stages)
            assert not any(s in found["stages"] for s in ["x"])
        else:
            assert found["first_head"] is None, mode


def test_a_window_sinks_and_a_sink_logit_through_the_api(client):
    body = post(client, {"tokens": X.tolist(), "heads": 2, "window": 2, "sinks": 1, "sink_logit": [0.5, -0.5]})
    ref = reference_mha(X.tolist(), 2, window=2, sinks=1, sink_logit=[0.5, -0.5])
    for h, head in enumerate(body["heads"]):
        np.testing.assert_allclose(head["weights"], ref["weights"][h], rtol=0, atol=1e-12)
        np.testing.assert_allclose(head["row_sums"], np.sum(ref["weights"][h], axis=-1), rtol=0, atol=1e-12)
        assert all(total < 1 for total in head["row_sums"])
    assert body["long_context"] == {"window": 2, "sinks": 1, "sink_logit": [0.5, -0.5], "positions": "original"}
    assert body["heads"][0]["weights"][3][1] == 0  # position 1 is out of row 3's window and not a sink


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"window": 2, "causal": False}, "window"),
        ({"sinks": 1}, "sinks"),
        ({"sink_logit": [1.0]}, "sink_logit"),
        ({"window": 0}, "window"),
    ],
)
def test_a_window_the_engine_cannot_take_is_a_422_naming_it(client, extra, field):
    response = client.post("/api/v1/attention", json={"tokens": X.tolist(), "heads": 2, **extra})
    assert response.status_code == 422, response.json
    assert response.mimetype == "application/problem+json"
    assert field in response.json["errors"]


def test_the_decode_rolls_its_cache_under_a_window_and_equals_the_windowed_pass(client):
    body = {"tokens": X.tolist(), "heads": 2, "window": 2, "sinks": 1}
    response = client.post("/api/v1/attention/decode", json=body)
    assert response.status_code == 200, response.json
    decoded = response.json
    assert decoded["max_difference_from_full_pass"] <= 1e-12  # the pass under the same window and sink
    ref = reference_mha(X.tolist(), 2, window=2, sinks=1)
    for step in decoded["steps"]:
        t = step["position"]
        np.testing.assert_allclose(step["output"], ref["output"][t], rtol=0, atol=1e-12)
        held = step["cache_positions"]  # the sink, then the last two in their slots
        assert sorted(held) == sorted({0, *range(max(0, t - 1), t + 1)}) and len(held) <= 3
        keys = np.array(step["cache"]["key"])  # [kv_heads][slots][d_head]: the identity projection keeps X
        np.testing.assert_allclose(keys[0], X[held][:, : X.shape[1] // 2], rtol=0, atol=0)  # head 1's features
