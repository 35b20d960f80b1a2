"""A platform generates a client from /api/v1/openapi.json and runs the README's flows with it:
the document is valid OpenAPI, names the security each operation needs, documents the single
event and the batch as alternatives, and every request body the client builds from it works
against a real server (gunicorn, the shipped app) with a key made by the README's command."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from tests.live import sqlite_server

pytest.importorskip("openapi_spec_validator", reason="the dev extra installs openapi-spec-validator")
BIN = Path(sys.executable).parent
METHODS = {"get", "post", "put", "patch", "delete"}
GENERATOR = BIN / "openapi-python-client"
pytestmark = pytest.mark.skipif(not GENERATOR.exists(), reason="the dev extra installs openapi-python-client")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    directory = tmp_path_factory.mktemp("client")
    live = sqlite_server(directory, WORKBENCH_EXPORT_SETTLE_SECONDS="0")
    live.database_url = f"sqlite:///{directory / 'wb.db'}"
    yield live
    live.stop()


@pytest.fixture(scope="module")
def spec(server) -> dict:
    return requests.get(server.url + "/api/v1/openapi.json", timeout=10).json()


@pytest.fixture(scope="module")
def wbclient(spec, tmp_path_factory):
    """The client openapi-python-client generates from the served document, imported."""
    where = tmp_path_factory.mktemp("generated")
    (where / "openapi.json").write_text(json.dumps(spec))
    done = subprocess.run(
        [
            str(GENERATOR),
            "generate",
            "--path",
            str(where / "openapi.json"),
            "--meta",
            "none",
            "--output-path",
            str(where / "wbclient"),
        ],
        cwd=where,
        env={**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    sys.path.insert(0, str(where))
    try:
        yield importlib.import_module("wbclient")
    finally:
        sys.path.remove(str(where))
        for name in [m for m in sys.modules if m == "wbclient" or m.startswith("wbclient.")]:
            del sys.modules[name]


@pytest.fixture(scope="module")
def key(server) -> str:
    """`workbench keys create`, as the README says."""
    made = subprocess.run(
        [
            str(BIN / "workbench"),
            "keys",
            "create",
            "--platform",
            "my-lms",
            "--scopes",
            "events:write,progress:read,analytics:read",
        ],
        env={**os.environ, "WORKBENCH_DATABASE_URL": server.database_url},
        capture_output=True,
        text=True,
        check=True,
    )
    return made.stdout.strip().splitlines()[-1]


def test_the_document_is_valid_openapi(spec):
    from openapi_spec_validator import validate

    validate(spec)


def test_the_document_teaches_authentication(spec):
    schemes = spec["components"]["securitySchemes"]
    assert schemes["apiKey"] == {**schemes["apiKey"], "type": "http", "scheme": "bearer"}
    assert schemes["xapiBasic"]["scheme"] == "basic" and schemes["browserSession"]["in"] == "cookie"
    needing = {
        (method.upper(), path): op
        for path, ops in spec["paths"].items()
        for method, op in ops.items()
        if method in METHODS
        and path.startswith(("/api/v1/analytics", "/api/v1/learners", "/api/v1/events", "/api/v1/xapi/statements"))
    }
    assert needing, "the authenticated operations are documented"
    for (method, path), op in needing.items():
        assert op.get("security"), f"{method} {path} names no security"
        (scope,) = op["x-scopes"]
        assert f"`{scope}` scope" in op["description"], f"{method} {path} does not say which scope it needs"
    assert {"apiKey": []} in needing[("GET", "/api/v1/xapi/statements")]["security"]
    assert {"xapiBasic": []} in needing[("GET", "/api/v1/xapi/statements")]["security"]
    assert {"browserSession": []} not in needing[("GET", "/api/v1/analytics/events/export")]["security"]


def test_every_request_body_has_an_example_and_events_are_one_or_many(spec):
    for path, ops in spec["paths"].items():
        for method, op in ((m, o) for m, o in ops.items() if m in METHODS):
            body = op.get("requestBody", {}).get("content", {}).get("application/json")
            if body is not None:
                assert "example" in body or "examples" in body, f"{method.upper()} {path} has no example"
    events = spec["paths"]["/api/v1/events"]["post"]["requestBody"]["content"]["application/json"]
    assert {ref["$ref"].rsplit("/", 1)[-1] for ref in events["schema"]["oneOf"]} == {"Event", "EventBatch"}
    export = spec["paths"]["/api/v1/analytics/events/export"]["get"]["responses"]["200"]["content"]
    assert set(export) == {"application/x-ndjson", "text/csv"}


def _example(spec, path: str, name: str | None = None) -> dict:
    content = spec["paths"][path]["post"]["requestBody"]["content"]["application/json"]
    return content["examples"][name]["value"] if name else content["example"]


def test_the_readmes_flows_through_the_generated_client(wbclient, spec, server, key):
    from wbclient.api.attention import post_api_v1_attention, post_api_v1_attention_decode
    from wbclient.api.events import post_api_v1_events
    from wbclient.api.exports import get_api_v1_analytics_events_export
    from wbclient.api.kv_cache import post_api_v1_kv_cache
    from wbclient.api.learners import delete_api_v1_learners_learner, get_api_v1_learners_learner_progress
    from wbclient.models import AttentionRequest, CacheRequest, DecodeRequest, Event, EventBatch

    anyone = wbclient.Client(base_url=server.url)
    platform = wbclient.AuthenticatedClient(base_url=server.url, token=key)

    traced = post_api_v1_attention.sync_detailed(
        client=anyone, body=AttentionRequest.from_dict(_example(spec, "/api/v1/attention", "the workbench's tokens"))
    )
    assert traced.status_code == 200
    weights = traced.parsed.heads[0].weights
    assert len(weights) == 3 and all(abs(sum(row) - 1) < 1e-12 for row in weights)  # each row a distribution

    body = DecodeRequest.from_dict(_example(spec, "/api/v1/attention/decode", "latent attention"))
    decoded = post_api_v1_attention_decode.sync_detailed(client=anyone, body=body)
    assert decoded.status_code == 200 and decoded.parsed.max_difference_from_full_pass < 1e-12
    assert [len(step.heads[0].weights) for step in decoded.parsed.steps] == [1, 2, 3]  # over positions 0..t
    v2 = _example(spec, "/api/v1/kv-cache", "DeepSeek-V2 at 4,096 tokens in bf16")
    cache = post_api_v1_kv_cache.sync_detailed(client=anyone, body=CacheRequest.from_dict(v2))
    assert cache.status_code == 200 and cache.parsed.elements_per_token == 34_560

    one = post_api_v1_events.sync_detailed(
        client=platform, body=Event.from_dict(_example(spec, "/api/v1/events", "one event"))
    )
    assert one.status_code == 201 and one.parsed.created == 1
    many = post_api_v1_events.sync_detailed(
        client=platform, body=EventBatch.from_dict(_example(spec, "/api/v1/events", "a batch"))
    )
    assert many.status_code == 201 and many.parsed.created == 2
    assert (
        post_api_v1_events.sync_detailed(
            client=anyone, body=Event.from_dict(_example(spec, "/api/v1/events", "one event"))
        ).status_code
        == 401
    )

    progress = get_api_v1_learners_learner_progress.sync_detailed(
        "student-42", client=platform, lesson="multi-head-attention"
    )
    assert progress.status_code == 200
    (lesson,) = progress.parsed.lessons
    states = {c.id: c for c in lesson.checkpoints}
    assert states["predict"].completed_at is not None and states["predict"].response == "two features per head"
    assert states["explain"].completed_at is not None and states["implement"].completed_at is None

    export = get_api_v1_analytics_events_export.sync_detailed(client=platform)
    assert export.status_code == 200 and export.headers["content-type"].startswith("application/x-ndjson")
    exported = [json.loads(line) for line in export.content.decode().splitlines()]
    assert sorted(e["id"] for e in exported) == sorted(
        [_example(spec, "/api/v1/events", "one event")["id"]]
        + [e["id"] for e in _example(spec, "/api/v1/events", "a batch")["events"]]
    )

    erased = delete_api_v1_learners_learner.sync_detailed("student-42", client=platform)
    assert erased.status_code == 200
    gone = get_api_v1_learners_learner_progress.sync_detailed("student-42", client=platform)
    assert gone.status_code == 404
