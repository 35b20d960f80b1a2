"""`Accept: application/octet-stream`: the same numbers as the JSON response, in the safetensors
layout, read by the safetensors library itself; float32 on request; the large-trace path too."""

from __future__ import annotations

import json
import struct

import numpy as np
import orjson
import pytest

safetensors_numpy = pytest.importorskip("safetensors.numpy", reason="safetensors is a dev dependency")

BODY = {"tokens": np.random.default_rng(3).normal(size=(5, 8)).round(3).tolist(), "heads": 4, "kv_heads": 2}
BINARY = {"Accept": "application/octet-stream"}


def header(data: bytes) -> dict:
    (length,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8 : 8 + length])


def flatten(value, path=""):
    """The JSON body as {path: array-or-value}, the way the binary names its tensors."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            out.update(flatten(item, f"{path}.{key}" if path else key))
        return out
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        out = {}
        for i, item in enumerate(value):
            out.update(flatten(item, f"{path}.{i}"))
        return out
    return {path: value}


def assert_same_numbers(json_body: dict, data: bytes, dtype=np.float64):
    tensors = safetensors_numpy.load(data)
    metadata = header(data)["__metadata__"]
    expected = flatten(json_body)
    for path, value in expected.items():
        if path.endswith("masked_scores") and isinstance(value, list) and any(None in row for row in value):
            prefix = path.split("heads.")[0]
            masked = np.array([[v is None for v in row] for row in value])
            np.testing.assert_array_equal(tensors[prefix + "mask"], masked)
            scores = tensors[path.replace("masked_scores", "scores")]
            visible = np.array([[0.0 if v is None else v for v in row] for row in value])
            np.testing.assert_array_equal(np.where(masked, 0.0, scores), visible.astype(dtype))
        elif path in tensors:
            array = np.asarray(value)
            want = array.astype(dtype) if array.dtype.kind == "f" else array
            np.testing.assert_array_equal(tensors[path], want, err_msg=path)
            assert tensors[path].dtype == (dtype if array.dtype.kind == "f" else tensors[path].dtype)
        else:
            assert json.loads(metadata[path]) == value, path


def test_the_binary_trace_equals_the_json_number_for_number(client):
    as_json = client.post("/api/v1/attention", json=BODY)
    as_binary = client.post("/api/v1/attention", json=BODY, headers=BINARY)
    assert as_binary.status_code == 200 and as_binary.content_type == "application/octet-stream"
    assert_same_numbers(orjson.loads(as_json.data), as_binary.data)
    assert len(safetensors_numpy.load(as_binary.data)) >= 4 * 9  # every per-head array of every head
    assert header(as_binary.data)["heads.0.weights"]["dtype"] == "F64"
    assert (8 + struct.unpack("<Q", as_binary.data[:8])[0]) % 8 == 0  # data 8-byte aligned


def test_float32_on_request_halves_the_floats(client):
    as_json = client.post("/api/v1/attention", json=BODY)
    as_f32 = client.post("/api/v1/attention", json=BODY, headers={"Accept": "application/octet-stream; dtype=float32"})
    assert header(as_f32.data)["heads.0.weights"]["dtype"] == "F32"
    assert_same_numbers(orjson.loads(as_json.data), as_f32.data, dtype=np.float32)


def test_include_and_precision_apply_to_the_binary_as_to_the_json(client):
    body = {**BODY, "include": ["weights", "concat"], "precision": 3}
    as_json = orjson.loads(client.post("/api/v1/attention", json=body).data)
    data = client.post("/api/v1/attention", json=body, headers=BINARY).data
    assert_same_numbers(as_json, data)
    assert not any(name.endswith(".query") for name in safetensors_numpy.load(data))


def test_the_binary_comparison_equals_the_json(client):
    body = {**BODY, "failure_mode": "no_scaling"}
    as_json = orjson.loads(client.post("/api/v1/attention/compare", json=body).data)
    data = client.post("/api/v1/attention/compare", json=body, headers=BINARY).data
    assert_same_numbers(as_json, data)
    assert "differences.weights" in safetensors_numpy.load(data)


def test_a_large_trace_comes_back_binary_from_the_background_path(app_config):
    from service.app import create_app

    app = create_app({**app_config, "heavy_compute_cells": 10})  # every request takes the background path
    client = app.test_client()
    as_json = client.post("/api/v1/attention", json=BODY)
    as_binary = client.post("/api/v1/attention", json=BODY, headers=BINARY)
    assert as_binary.content_type == "application/octet-stream"
    assert_same_numbers(orjson.loads(as_json.get_data()), as_binary.get_data())
    as_json.close()
    as_binary.close()


def test_json_stays_the_default(client):
    for accept in (None, "*/*", "application/json", "application/json, application/octet-stream;q=0.5"):
        headers = {"Accept": accept} if accept else {}
        assert client.post("/api/v1/attention", json=BODY, headers=headers).content_type == "application/json"


def test_openapi_documents_both(client):
    spec = client.get("/api/v1/openapi.json").json
    content = spec["paths"]["/api/v1/attention"]["post"]["responses"]["200"]["content"]
    assert {"application/json", "application/octet-stream"} <= set(content)
