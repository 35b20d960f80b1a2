"""The API reference holds every field the API answers (issue 65, C9): each operation's own example body is
posted (each GET without parameters is asked), and every key of every object in the answer must be a
property of the response schema the OpenAPI document (and so the reference at /api/docs) gives for it."""

from __future__ import annotations

import pytest

from .helpers import answered

# Objects whose keys are data, not fields: documented as maps (their values' shape is documented).
MAPS = {"additionalProperties"}


def resolve(spec: dict, schema: dict) -> dict:
    while "$ref" in schema:
        schema = spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def undocumented(spec: dict, schema: dict, value, where: str) -> list[str]:
    """Every key of `value` (recursively) that its schema does not name."""
    schema = resolve(spec, schema or {})
    if isinstance(value, list):
        items = schema.get("items")
        return [m for v in value[:3] for m in undocumented(spec, items, v, f"{where}[]")] if items else []
    if not isinstance(value, dict) or not schema:
        return []
    properties = schema.get("properties")
    if properties is None:  # a map, or a free-form object: its keys are data
        inner = schema.get("additionalProperties")
        if isinstance(inner, dict):
            return [m for k, v in value.items() for m in undocumented(spec, inner, v, f"{where}.{k}")]
        return []
    missing = [f"{where}.{key}" for key in value if key not in properties]
    for key, item in value.items():
        if key in properties:
            missing += undocumented(spec, properties[key], item, f"{where}.{key}")
    return missing


PATH_VALUES = {"{model_id}": "bytes-2l-attn"}
# Bodies for operations the document gives no example of, built from the presets the service serves.
EXTRA = {
    "/api/v1/attention/tiled": lambda c: {**c.get("/api/v1/presets/online-softmax").json["request"], "heads": 2},
    "/api/v1/attention/compare": lambda c: {
        **c.get("/api/v1/presets/workbench").json["request"],
        "failure_mode": "reuse_first_slice",
    },
}


def operations(spec: dict, client):
    for path, methods in spec["paths"].items():
        real = path
        for name, value in PATH_VALUES.items():
            real = real.replace(name, value)
        for method, op in methods.items():
            if method == "post":
                content = op.get("requestBody", {}).get("content", {}).get("application/json", {})
                for name, example in (content.get("examples") or {}).items():
                    yield method, path, real, example.get("value"), name, op
                if path in EXTRA:
                    yield method, path, real, EXTRA[path](client), "a preset", op
            elif method == "get" and "{" not in real and not op.get("parameters"):
                yield method, path, real, None, "", op


def test_every_answered_field_is_in_the_reference(client):
    spec = client.get("/api/v1/openapi.json").json
    missing, asked = [], 0
    for method, path, real, body, name, op in operations(spec, client):
        schema = op.get("responses", {}).get("200", {}).get("content", {}).get("application/json", {}).get("schema")
        if schema is None:
            continue
        response = client.post(real, json=body) if method == "post" else client.get(real)
        if response.status_code != 200:
            continue  # a key-protected resource: its fields are read by its own tests
        asked += 1
        missing += [f"{method.upper()} {path} ({name}): {m}" for m in undocumented(spec, schema, response.json, "")]
    assert asked >= 20  # the compute endpoints, the models, the lessons, the presets, the registry
    assert missing == []


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/api/v1/attention/decode", {"tokens": [[1, 0], [0, 1], [1, 1]], "heads": 1}, "max_difference_from_full_pass"),
    ],
)
def test_the_fields_the_probe_found_missing_are_documented(client, path, body, field):
    spec = client.get("/api/v1/openapi.json").json
    answer = client.post(path, json=body).json
    assert field in answer
    schema = resolve(spec, spec["paths"][path]["post"]["responses"]["200"]["content"]["application/json"]["schema"])
    assert field in schema["properties"]


KEYED = {"{lesson_id}": "multi-head-attention", "{learner}": "learner-1"}


def test_every_field_answered_under_a_key_is_in_the_reference(client, acme):
    """The same for what only a key reads (issue 65, C9: the gain's `normalized_gain`, the progress answers'
    fields): a learner answers before and after, then every GET of progress and analytics is asked."""
    for learner, right in (("learner-1", "2"), ("learner-2", "4")):
        for phase in ("pre", "post"):
            body = answered("head-width", int(right if phase == "post" else 8), phase=phase, learner=learner)
            assert client.post("/api/v1/events", json=body, headers=acme).status_code == 201
    spec = client.get("/api/v1/openapi.json").json
    missing, asked = [], []
    for path, methods in spec["paths"].items():
        if "get" not in methods or not path.startswith(("/api/v1/analytics", "/api/v1/learners")):
            continue
        real = path
        for name, value in KEYED.items():
            real = real.replace(name, value)
        if "{" in real:
            continue
        schema = methods["get"]["responses"].get("200", {}).get("content", {}).get("application/json", {})
        response = client.get(f"{real}?lesson=multi-head-attention", headers=acme)
        if response.status_code != 200 or "schema" not in schema:
            continue
        asked.append(path)
        missing += [f"GET {path}: {m}" for m in undocumented(spec, schema["schema"], response.json, "")]
    assert "/api/v1/analytics/lessons/{lesson_id}/items" in asked and any("progress" in p for p in asked), asked
    assert missing == []
    gain = client.get("/api/v1/analytics/lessons/multi-head-attention/items", headers=acme).json
    assert "normalized_gain" in str(gain)


@pytest.mark.parametrize("exercise", ["multi-head-attention", "online-softmax"])
def test_each_exercises_documented_check_example_is_right_or_a_named_slip(client, exercise):
    """Issue 65, C9: the reference's example of a check teaches what a check says: the right output, or a
    slip it names (not an output that is neither, answered with advice about another exercise)."""
    spec = client.get("/api/v1/openapi.json").json
    path = f"/api/v1/exercises/{exercise}/check"
    example = spec["paths"][path]["post"]["requestBody"]["content"]["application/json"]["example"]
    answer = client.post(path, json=example).json
    assert answer["correct"] or answer["mistakes"], answer
