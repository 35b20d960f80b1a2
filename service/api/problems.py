"""RFC 9457 problem details: every error the service gives has this shape."""

from __future__ import annotations

from typing import Any

from flask import Response
from werkzeug.http import HTTP_STATUS_CODES

from .jsonio import dumps_bytes

PROBLEM_MIMETYPE = "application/problem+json"
TYPE_BASE = "https://attention-workbench.invalid/problems/"


class Problem(Exception):
    """Raise anywhere in a request to answer with problem+json."""

    def __init__(
        self,
        status: int,
        detail: str,
        *,
        title: str | None = None,
        errors: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        slug: str | None = None,
        extra: dict[str, Any] | None = None,
    ):
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.title = title or HTTP_STATUS_CODES.get(status, "Error")
        self.errors = errors
        self.headers = headers or {}
        self.slug = slug or self.title.lower().replace(" ", "-").replace("'", "")
        self.extra = extra or {}

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "type": TYPE_BASE + self.slug,
            "title": self.title,
            "status": self.status,
            "detail": self.detail,
        }
        if self.errors:
            body["errors"] = self.errors
        body.update(self.extra)
        return body

    def response(self) -> Response:
        response = Response(dumps_bytes(self.body()), status=self.status, mimetype=PROBLEM_MIMETYPE)
        for key, value in self.headers.items():
            response.headers[key] = value
        return response
