"""Large traces take the low-priority path and answer exactly what the direct path does."""

import numpy as np
import orjson

from service.api import heavy
from service.app import create_app

BODY = {"tokens": np.random.default_rng(9).normal(size=(12, 8)).round(3).tolist(), "heads": 2}


def test_the_heavy_path_returns_the_same_json(app_config):
    direct = create_app(app_config).test_client().post("/api/v1/attention", json=BODY)
    offloaded = create_app({**app_config, "heavy_compute_cells": 1}).test_client().post("/api/v1/attention", json=BODY)
    assert offloaded.status_code == 200 and offloaded.mimetype == "application/json"
    assert orjson.loads(offloaded.get_data()) == orjson.loads(direct.get_data())
    offloaded.close()


def test_the_heavy_path_reports_input_errors_as_422(app_config):
    client = create_app({**app_config, "heavy_compute_cells": 1}).test_client()
    response = client.post("/api/v1/attention", json={"tokens": [[1e200] * 4] * 3, "heads": 2})
    assert response.status_code == 422 and "overflowed" in response.json["detail"]
    compare = client.post("/api/v1/attention/compare", json={**BODY, "failure_mode": "no_scaling"})
    assert compare.status_code == 200 and set(orjson.loads(compare.get_data())) >= {"correct", "broken"}
    compare.close()


def test_a_busy_worker_sheds_large_traces_with_503(app_config):
    app = create_app({**app_config, "heavy_compute_cells": 1})
    client = app.test_client()
    with app.app_context():
        _, slots = heavy._executor(1)
    slots.acquire()
    try:
        response = client.post("/api/v1/attention", json=BODY)
    finally:
        slots.release()
    assert response.status_code == 503 and response.headers["Retry-After"] == "1"
    assert client.post("/api/v1/attention", json={"tokens": [[1.0, 2.0]], "heads": 1}).status_code == 200
