"""`/api/docs`: Swagger UI over /api/v1/openapi.json, every asset served from here (works offline)."""

from __future__ import annotations

from pathlib import Path

from flask import Blueprint, Response, abort, send_from_directory
from swagger_ui_bundle import swagger_ui_path

blp = Blueprint("api_docs", __name__)

ASSETS = {"swagger-ui.css", "swagger-ui-bundle.js", "favicon-32x32.png"}
PAGE = """<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>Multi-head attention workbench API</title>
  <link rel="stylesheet" href="/api/docs/assets/swagger-ui.css">
  <link rel="icon" href="/api/docs/assets/favicon-32x32.png">
</head>
<body>
  <main id="swagger-ui" aria-label="API reference"></main>
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
  validatorUrl: null
});
"""


@blp.get("/api/docs")
def page():
    return Response(PAGE, mimetype="text/html")


@blp.get("/api/docs/init.js")
def init_js():
    return Response(INIT, mimetype="text/javascript")


@blp.get("/api/docs/assets/<path:name>")
def asset(name: str):
    if name not in ASSETS:
        abort(404)
    return send_from_directory(Path(swagger_ui_path), name, max_age=86400)
