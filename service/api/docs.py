"""`/api/docs`: the API reference, rendered on the server from the OpenAPI document (no script,
fast, accessible), and `/api/docs/try`: Swagger UI's interactive console over the same document,
every asset served from here (works offline): `/api/docs/init.js`, `/api/docs/assets/{name}`."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

from flask import Blueprint, Response, abort, current_app, render_template, request, send_from_directory
from markdown_it import MarkdownIt
from markupsafe import Markup
from swagger_ui_bundle import swagger_ui_path

blp = Blueprint("api_docs", __name__, template_folder="templates")

METHODS = ("get", "post", "put", "patch", "delete")
ASSETS = {"swagger-ui.css", "swagger-ui-bundle.js", "favicon-32x32.png"}
CONSOLE = """<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>API console · Multi-head attention workbench</title>
  <link rel="stylesheet" href="/api/docs/assets/swagger-ui.css">
  <link rel="icon" href="/api/docs/assets/favicon-32x32.png">
</head>
<body>
  <main id="swagger-ui" aria-label="API console"></main>
  <script src="/api/docs/assets/swagger-ui-bundle.js"></script>
  <script src="/api/docs/init.js"></script>
</body>
</html>
"""
INIT = """window.ui = SwaggerUIBundle({
  url: "/api/v1/openapi.json",
  dom_id: "#swagger-ui",
  deepLinking: true,
  queryConfigEnabled: false,
  validatorUrl: null,
  syntaxHighlight: { activated: false }
});
"""
_markdown = MarkdownIt("commonmark", {"html": False})


def md(text: str | None) -> Markup:
    return Markup(_markdown.render(text or ""))  # html off: the document's text cannot inject markup


def resolve(spec: dict, node: dict) -> dict:
    """`node` with its `$ref` (to this document) followed."""
    while isinstance(node, dict) and "$ref" in node:
        target: Any = spec
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = target
    return node


def type_of(spec: dict, schema: dict) -> str:
    if "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[-1]
    if "oneOf" in schema or "anyOf" in schema:
        return " or ".join(type_of(spec, s) for s in schema.get("oneOf") or schema.get("anyOf") or [])
    if "allOf" in schema:  # a described or nullable reference: {"allOf": [{"$ref": ...}], "nullable": true}
        named = " and ".join(type_of(spec, s) for s in schema["allOf"])
        return named + (" or null" if schema.get("nullable") else "")
    kind = schema.get("type", "object" if "properties" in schema else "any")
    if kind == "array":
        return f"array of {type_of(spec, schema.get('items', {}))}"
    if "enum" in schema:
        return f"{kind}: one of " + ", ".join(json.dumps(v) for v in schema["enum"])
    return kind + (f" ({schema['format']})" if "format" in schema else "")


def scheme_kind(scheme: dict) -> str:
    if scheme["type"] == "http":
        return f"HTTP {scheme['scheme'].capitalize()} (Authorization header)"
    return f"{scheme['type']} in the {scheme['in']} {scheme['name']}"


def security(op: dict) -> Markup:
    """ "`apiKey` or `browserSession`; scope `events:write`", or nothing for an open operation."""
    schemes = Markup(" or ").join(Markup("<code>%s</code>") % n for entry in op.get("security", []) for n in entry)
    scopes = Markup(", ").join(Markup("<code>%s</code>") % s for s in op.get("x-scopes", []))
    return schemes + (Markup("; scope ") + scopes if scopes else "") if schemes else Markup("")


def _object(spec: dict, schema: dict) -> dict | None:
    """The object a field holds (through a reference, allOf or an array's items), or None."""
    schema = resolve(spec, schema)
    if schema.get("type") == "array":
        return _object(spec, schema.get("items", {}))
    if "allOf" in schema and len(schema["allOf"]) == 1:
        return _object(spec, schema["allOf"][0])
    return schema if "properties" in schema else None


def fields_of(spec: dict, schema: dict, prefix: str = "", depth: int = 3) -> list[dict]:
    """Every field of an object, and of the objects it holds (`heads[].query`, `latent.down`), as
    far as `depth` levels: what a client sends or reads back, named by its path."""
    target = _object(spec, schema)
    if target is None or depth == 0:
        return []
    required = set(target.get("required", []))
    found = []
    for name, prop in target.get("properties", {}).items():
        path = f"{prefix}{name}"
        found.append(
            {
                "name": path,
                "required": name in required,
                "type": type_of(spec, prop),
                "description": prop.get("description", ""),
            }
        )
        inner = "[]." if resolve(spec, prop).get("type") == "array" else "."
        found += fields_of(spec, prop, path + inner, depth - 1)
    return found


def body(spec: dict, op: dict) -> dict | None:
    if "requestBody" not in op:
        return None
    content_type, media = next(iter(op["requestBody"]["content"].items()))
    schema = media.get("schema", {})
    fields = fields_of(spec, schema) if "$ref" in schema else []
    examples = [(f"Example: {label}", ex["value"]) for label, ex in media.get("examples", {}).items()]
    if "example" in media:
        examples.append(("Example", media["example"]))
    return {
        "content_type": content_type,
        "schema": type_of(spec, schema) if schema else "",
        "fields": fields,
        "examples": [(label, json.dumps(value, indent=2, ensure_ascii=False)) for label, value in examples],
    }


def parameters(spec: dict, path_item: dict, op: dict) -> list[dict]:
    every = (resolve(spec, p) for p in [*path_item.get("parameters", []), *op.get("parameters", [])])
    return [{**p, "type": type_of(spec, p.get("schema", {})), "description": p.get("description", "")} for p in every]


def responses(spec: dict, op: dict) -> list[tuple[str, str, str, list[dict]]]:
    """Each answer: its status, description, content types and, for a JSON success, its fields."""
    found = []
    for status in sorted(op.get("responses", {}), key=lambda s: (s == "default", s)):
        answer = resolve(spec, op["responses"][status])
        content = answer.get("content", {})
        schema = content.get("application/json", {}).get("schema", {})
        fields = fields_of(spec, schema) if status.startswith("2") and schema else []
        found.append((status, answer.get("description", ""), ", ".join(content), fields))
    return found


def reference(spec: dict) -> list[dict]:
    """The operations grouped by tag, in the document's tag order."""
    groups = {
        t["name"]: {**t, "title": t["name"].replace("_", " ").capitalize(), "operations": []} for t in spec["tags"]
    }
    for path, item in spec["paths"].items():
        for method in METHODS:
            if method not in item:
                continue
            op = item[method]
            tag = (op.get("tags") or ["other"])[0]
            groups.setdefault(tag, {"name": tag, "title": tag.capitalize(), "operations": []})
            groups[tag]["operations"].append(
                {
                    "anchor": re.sub(r"[^a-z0-9]+", "-", f"{method} {path}".lower()).strip("-"),
                    "method": method.upper(),
                    "path": path,
                    "summary": op.get("summary", ""),
                    "description": op.get("description", ""),
                    "security": security(op),
                    "parameters": parameters(spec, item, op),
                    "body": body(spec, op),
                    "responses": responses(spec, op),
                }
            )
    return [g for g in groups.values() if g["operations"]]


@blp.get("/api/docs")
def page():
    pages = current_app.extensions.get("api_reference")
    if pages is None:  # rendered (and compressed: 240 KB of HTML, a phone's slowest page) once per app
        spec = current_app.extensions["api"].document()
        html = render_template("api_reference.html", spec=spec, groups=reference(spec), md=md, scheme_kind=scheme_kind)
        pages = current_app.extensions["api_reference"] = (html.encode(), gzip.compress(html.encode(), 9, mtime=0))
    zipped = request.accept_encodings["gzip"] > 0
    answer = Response(pages[zipped], mimetype="text/html", headers={"Vary": "Accept-Encoding"})
    if zipped:
        answer.headers["Content-Encoding"] = "gzip"
    return answer


@blp.get("/api/docs/try")
def console():
    return Response(CONSOLE, mimetype="text/html")


@blp.get("/api/docs/init.js")
def init_js():
    return Response(INIT, mimetype="text/javascript")


@blp.get("/api/docs/assets/<path:name>")
def asset(name: str):
    if name not in ASSETS:
        abort(404)
    return send_from_directory(Path(swagger_ui_path), name, max_age=86400)
