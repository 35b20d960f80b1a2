"""The OpenAPI document describes every endpoint with its problem+json errors; schemathesis
fuzzes it in-process and finds no server error and no response outside its own schema."""

import os
import re
import tempfile
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import positive_data_acceptance

from service.app import create_app
from service.db.migrate import upgrade
from service.db.platforms import create_key
from service.identity import SCOPES

PROBLEM = "application/problem+json"


@pytest.fixture
def spec(client):
    response = client.get("/api/v1/openapi.json")
    assert response.status_code == 200
    return response.json


def test_document_lists_every_compute_endpoint(spec):
    assert spec["openapi"].startswith("3.0")
    assert {"/api/v1/attention", "/api/v1/attention/compare", "/api/v1/presets", "/api/v1/presets/{preset_id}"} <= set(
        spec["paths"]
    )


def test_every_error_response_is_documented_as_problem_json(spec):
    components = spec["components"]["responses"]
    seen = 0
    for path, methods in spec["paths"].items():
        for method, operation in methods.items():
            if method == "parameters":
                continue
            assert operation.get("summary"), f"{method} {path} has no summary"
            for status, response in operation["responses"].items():
                if status == "default" or int(status) >= 400:
                    if "$ref" in response:
                        response = components[response["$ref"].rsplit("/", 1)[-1]]
                    assert list(response["content"]) == [PROBLEM], (path, method, status)
                    seen += 1
    assert seen >= 12


def test_post_operations_document_their_input_errors(spec):
    responses = spec["paths"]["/api/v1/attention"]["post"]["responses"]
    assert {"200", "400", "413", "415", "422"} <= set(responses)


def test_the_console_and_its_assets_are_served_locally(client):
    page = client.get("/api/docs/try")
    assert page.status_code == 200 and b"swagger-ui" in page.data
    for src in ("/api/docs/assets/swagger-ui-bundle.js", "/api/docs/assets/swagger-ui.css", "/api/docs/init.js"):
        assert src.encode() in page.data
        asset = client.get(src)
        assert asset.status_code == 200 and len(asset.data) > 100
        asset.close()
    assert b"http" not in page.data.replace(b"http-equiv", b"")  # nothing loaded from elsewhere


def test_the_reference_shows_every_operation_with_its_scope_and_examples(client, spec):
    """Read as a platform engineer would: each operation's method and path as a heading, the
    scope it needs, every parameter, and each request example, the same JSON the document holds."""
    import html
    import json as json_module

    page = client.get("/api/docs")
    assert page.status_code == 200 and page.mimetype == "text/html"
    text = page.get_data(as_text=True)
    assert "<script" not in text  # a page to read: nothing to run
    headings = re.findall(r'<h3 id="([^"]+)"><code>([A-Z]+) ([^<]+)</code></h3>', text)
    documented = {(m.upper(), p) for p, ops in spec["paths"].items() for m in ops if m in ("get", "post", "delete")}
    assert {(m, html.unescape(p)) for _, m, p in headings} == documented
    assert len({anchor for anchor, _, _ in headings}) == len(headings)  # every anchor is its own
    for anchor, method, path in headings:
        op = spec["paths"][html.unescape(path)][method.lower()]
        section = text[text.index(f'id="{anchor}"') :].split("</article>", 1)[0]
        for scope in op.get("x-scopes", []):
            assert f"<code>{scope}</code>" in section, (path, scope)
        for parameter in op.get("parameters", []):
            assert f"<code>{parameter['name']}</code>" in section, (path, parameter["name"])
        media = next(iter(op.get("requestBody", {}).get("content", {}).values()), {})
        examples = [e["value"] for e in media.get("examples", {}).values()] + (
            [media["example"]] if "example" in media else []
        )
        shown = [
            json_module.loads(html.unescape(b))
            for b in re.findall(r"<pre tabindex=\"0\"><code>(.*?)</code></pre>", section, re.S)
        ]
        assert shown == examples, path


def _fuzz_app():
    # Built at import: schemathesis parametrizes at collection time. A migrated SQLite file,
    # a key with every scope (so authenticated endpoints are fuzzed past the 401), small caps.
    url = f"sqlite:///{Path(tempfile.mkdtemp(prefix='fuzz-')) / 'wb.db'}"
    upgrade(url)
    app = create_app(
        {
            "env": "testing",
            "database_url": url,
            "ratelimit_enabled": False,
            "max_tokens": 16,
            "max_d_model": 16,
            "max_heads": 8,
        }
    )
    with app.extensions["db"].write() as session:
        key, _ = create_key(session, "fuzz", frozenset(SCOPES))
    return app, key.token


FUZZ_APP, FUZZ_TOKEN = _fuzz_app()


# 413 is a rejection too: an invalid body that is also over a cap is refused for its size first.
# The key is the run's configured credential, so schemathesis knows it is real and probes each
# operation's security by removing it and by sending invalid credentials (expecting 401).
CONFIG = SchemathesisConfig.from_dict(
    {
        "headers": {"Authorization": f"Bearer {FUZZ_TOKEN}"},
        "checks": {
            "negative_data_rejection": {
                "expected-statuses": [400, 401, 403, 404, 405, 406, 409, 413, 415, 422, 428, 429]
            }
        },
    }
)
schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", FUZZ_APP, config=CONFIG)


@schema.parametrize()
@settings(
    max_examples=int(os.environ.get("WORKBENCH_FUZZ_EXAMPLES", "40")),
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
def test_fuzzed_requests_get_no_server_error_and_conform(case):
    response = case.call()
    assert response.status_code < 500, response.text
    # Excluded: "schema-valid data must be accepted". Constraints across fields (d_model
    # divisible by heads, rows of equal length, projection shapes) cannot be written in
    # OpenAPI, so a schema-valid body can rightly be a 422. Every other check runs.
    case.validate_response(response, excluded_checks=[positive_data_acceptance])
