"""The OpenAPI document describes every endpoint with its problem+json errors; schemathesis
fuzzes it in-process with every check and finds no server error, no response outside its own
schema, no schema-invalid request accepted, and no schema-valid one refused except for what
JSON Schema cannot say (listed below, each with the problem it is refused with)."""

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
        "auth": {"openapi": {"apiKey": {"bearer": FUZZ_TOKEN}}},
        "checks": {
            "negative_data_rejection": {
                "expected-statuses": [400, 401, 403, 404, 405, 406, 409, 413, 415, 422, 428, 429]
            }
        },
    }
)
schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", FUZZ_APP, config=CONFIG)


# What JSON Schema cannot say, each refused in words of its own (docs/security.md, "What the
# document cannot say"): a schema-valid request refused for one of these is the document being
# honest about its limits; refused for anything else, it is a disagreement and the test fails.
BEYOND_THE_SCHEMA = {
    # shapes that depend on other values: heads divides d_model (and kv_heads heads), every row
    # as long as the first, projections and latent matrices sized by d_model, heads and d_head
    ("invalid-attention-input", ""),
    ("invalid-cursor", ""),  # a cursor is one the service gave out: it is signed
    ("unprocessable-entity", "from"),  # 'from' before 'to': an order between two values
    ("unprocessable-entity", "events"),  # the lesson's own rules: its checkpoints, what completes each
    ("unprocessable-entity", "learner"),  # a platform names the learner; a browser session is one
    ("unprocessable-entity", "answers"),  # as many answers as the challenge (stored) has cases
    ("unprocessable-entity", "output"),  # the output's shape follows the case's
    ("unprocessable-entity", "ablate"),  # layers and heads that the model in the path has
    ("unprocessable-entity", "prefill"),  # at most the tokens given
    ("unprocessable-entity", "block_q"),  # a tile's sides: at most the tokens given
    ("unprocessable-entity", "block_k"),
    # a matrix is rectangular (every row as long as the first); its sizes follow d_model and heads
    ("unprocessable-entity", "tokens"),
    ("unprocessable-entity", "projections"),
    ("unprocessable-entity", "latent"),
    ("unprocessable-entity", "heads"),  # heads divides d_model (the exercise's cases)
    ("unprocessable-entity", "case"),
    # p and q: each sums to 1, both over one vocabulary (speculative sampling)
    ("unprocessable-entity", "p"),
    ("unprocessable-entity", "q"),
    # one event alone: the lesson's own rules, as for a batch's (`events.N.` then)
    ("unprocessable-entity", "checkpoint"),
    ("unprocessable-entity", "item"),  # an item of the lesson, on an answered event only
    ("unprocessable-entity", "event"),
    ("unprocessable-entity", "data"),
    ("unprocessable-entity", "occurred_at"),  # from 2000 to the server's clock (and a few minutes)
    ("unprocessable-entity", "corrupted"),  # a patch's two texts as long as each other, in bytes
    ("unprocessable-entity", "metric"),  # a metric's bytes as its kind needs them (two, or one)
    ("unprocessable-entity", "contextTemplate"),  # a cmi5 context template of at most 16 KB, as JSON
}
# Caps on products of sizes (heads * n * n, a decode's every step, the tiles and their numbers; a text's
# bytes within the context of the model in the path): the single sizes' caps are in the document, their
# products not.
PRODUCT_CAPS = {
    "max_score_cells",
    "max_decode_cells",
    "max_tiles",
    "max_tiled_cells",
    "context",
    "patch_bytes",
    "prompt_bytes",
}


def beyond_the_schema(response) -> bool:
    if response.status_code not in (400, 413, 422):
        return False
    problem = response.json()
    slug = problem.get("type", "").rsplit("/", 1)[-1]
    if slug == "over-limit":
        return bool(PRODUCT_CAPS & set(problem.get("limits") or {}))
    fields = list(problem.get("errors") or {}) or [""]
    return all(any(slug == s and f.startswith(prefix) for s, prefix in BEYOND_THE_SCHEMA) for f in fields)


def test_the_reference_reaches_a_phone_compressed_and_reads_the_same(client):
    """240 KB of HTML is the slowest page on a throttled phone: a browser that accepts gzip gets it
    compressed to a fraction, and it unpacks to the very page a client without gzip reads."""
    import gzip

    plain = client.get("/api/docs")
    packed = client.get("/api/docs", headers={"Accept-Encoding": "gzip, deflate, br"})
    assert "Content-Encoding" not in plain.headers and packed.headers["Content-Encoding"] == "gzip"
    assert all("Accept-Encoding" in r.headers["Vary"] for r in (plain, packed))  # caches keep both apart
    assert gzip.decompress(packed.get_data()) == plain.get_data()
    assert len(packed.get_data()) < len(plain.get_data()) / 4
    refused = client.get("/api/docs", headers={"Accept-Encoding": "gzip;q=0, identity"})
    assert "Content-Encoding" not in refused.headers and refused.get_data() == plain.get_data()


@schema.parametrize()
@settings(
    max_examples=int(os.environ.get("WORKBENCH_FUZZ_EXAMPLES", "40")),
    deadline=None,
    derandomize=True,  # seeded: the same cases on every run (CI: bounded and repeatable)
    suppress_health_check=list(HealthCheck),
)
def test_fuzzed_requests_get_no_server_error_and_the_document_is_the_server(case):
    """Every check schemathesis has (`--checks all`), in its positive and negative phases:
    schema-valid requests are accepted unless refused for what the schema cannot say (above),
    schema-invalid ones refused, every response within its documented schema."""
    response = case.call()
    assert response.status_code < 500, response.text
    positive = case.meta is not None and case.meta.generation.mode.is_positive
    if positive and response.status_code >= 400 and beyond_the_schema(response):
        case.validate_response(response, excluded_checks=[positive_data_acceptance])
    else:
        case.validate_response(response)


def test_an_empty_output_is_refused_and_the_document_says_so(client, spec):
    """The checker needs at least one of the output's parts: the document says `minProperties: 1`,
    as the server refuses `{}` (a generated client then cannot build a body the server refuses)."""
    assert spec["components"]["schemas"]["Output"]["minProperties"] == 1
    body = {"case": {"tokens": [[1.0, 0.0], [0.0, 1.0]], "heads": 1}, "output": {}}
    refused = client.post("/api/v1/exercises/multi-head-attention/check", json=body)
    assert refused.status_code == 422 and refused.mimetype == "application/problem+json"


@pytest.mark.parametrize(
    "anchor_path, fields",
    [
        (
            "/api/v1/attention/decode",
            ["steps", "steps[].heads", "steps[].heads[].weights", "steps[].cache", "max_difference_from_full_pass"],
        ),
        (
            "/api/v1/kv-cache",
            ["kind", "bytes_per_token", "bytes_total", "mha_equivalent", "mha_equivalent.bytes_total"],
        ),
        (
            "/api/v1/analytics/lessons/{lesson_id}/items",
            ["items", "items[].choices", "items[].choices[].misconception", "gain"],
        ),
        ("/api/v1/attention", ["heads", "heads[].weights", "concat", "output"]),
    ],
)
def test_the_reference_shows_what_each_operation_answers(client, spec, anchor_path, fields):
    """What comes back, field by field, nested bodies with their fields: what the document defines."""
    import html

    text = html.unescape(client.get("/api/docs").get_data(as_text=True))
    heading = re.search(rf'<h3 id="[^"]+"><code>(GET|POST) {re.escape(anchor_path)}</code></h3>', text)
    section = text[heading.start() :].split("</article>", 1)[0]
    shown = re.findall(r'data-response-field="([^"]+)"', section)
    assert set(fields) <= set(shown), sorted(set(fields) - set(shown))
    typed = dict(re.findall(r'data-response-field="([^"]+)"><td><code>[^<]*</code></td><td>([^<]*)</td>', section))
    assert "any" not in typed.values(), typed


def test_the_reference_types_nested_request_fields_by_their_schemas(client):
    import html

    text = html.unescape(client.get("/api/docs").get_data(as_text=True))
    heading = re.search(r'<h3 id="[^"]+"><code>POST /api/v1/attention</code></h3>', text)
    section = text[heading.start() :].split("</article>", 1)[0]
    for field, kind in (("latent", "Latent"), ("rope", "Rope or null"), ("projections", "Projections")):
        assert re.search(rf"<td><code>{field}</code></td><td>{kind}</td>", section), field
    assert "<code>latent.down</code>" in section and "<code>projections.output</code>" in section
