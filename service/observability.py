"""Request ids, JSON logs without learner ids or keys, security headers, Prometheus metrics."""

from __future__ import annotations

import json
import logging
import os
import re
import time
import uuid
from typing import Any

from flask import Flask, Response, current_app, g, request
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)

REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{8,64}$")

REQUESTS = Histogram(
    "workbench_request_seconds",
    "Request latency by endpoint",
    ["endpoint", "method", "status"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
EVENTS = Counter("workbench_events_total", "Events by outcome", ["outcome"])  # created, duplicate, erased
CONFLICTS = Counter("workbench_event_conflicts_total", "Requests refused with 409 (same id, other content)")
UNAVAILABLE = Counter("workbench_unavailable_total", "Responses 503: the database did not answer")
RATELIMIT_STORAGE_TROUBLE = Counter(
    "workbench_ratelimit_storage_trouble_total",
    "Rate-limit store errors (limits then continue per worker, in memory)",
)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        body = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key in ("request_id", "endpoint", "method", "status", "duration_ms"):
            if hasattr(record, key):
                body[key] = getattr(record, key)
        if record.exc_info:
            body["error"] = self.formatException(record.exc_info)
        return json.dumps(body)


def configure_logging(level: str = "INFO") -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # its access lines carry raw paths


def security_header_values(settings) -> list[tuple[str, str]]:
    """The headers every response carries unless a view set its own; computed once per app."""
    ancestors = " ".join(["'self'", *settings.frame_ancestors])
    headers = [
        (
            "Content-Security-Policy",
            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
            f"font-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors {ancestors}",
        ),
        ("X-Content-Type-Options", "nosniff"),
        ("Referrer-Policy", "strict-origin-when-cross-origin"),
        ("Permissions-Policy", "camera=(), microphone=(), geolocation=()"),
        ("Cross-Origin-Opener-Policy", "same-origin"),
    ]
    if settings.env == "production":
        headers.append(("Strict-Transport-Security", "max-age=31536000; includeSubDomains"))
    return headers


def security_headers(response: Response) -> Response:
    present = {key.lower() for key in response.headers.keys()}  # one pass, not a scan per header
    for key, value in current_app.extensions["security_headers"]:
        if key.lower() not in present:
            response.headers.add(key, value)
    return response


def retry_after_only_when_it_means_something(response: Response) -> Response:
    """Retry-After belongs to 429 and 503; the rate limiter adds it to every response. Registered
    before every other after-request hook, so it runs after them all."""
    if response.status_code not in (429, 503):
        response.headers.pop("Retry-After", None)
    return response


def init_app(app: Flask) -> None:
    log = logging.getLogger("service.requests")
    app.extensions["security_headers"] = security_header_values(app.extensions["settings"])

    @app.before_request
    def _start() -> None:
        incoming = request.headers.get("X-Request-Id", "")
        g.request_id = incoming if REQUEST_ID.match(incoming) else uuid.uuid4().hex
        g.started = time.perf_counter()

    timers: dict[tuple[str, str, int], Any] = {}  # this app's histogram children, looked up once each

    @app.after_request
    def _finish(response: Response) -> Response:
        response.headers["X-Request-Id"] = g.get("request_id", "")
        security_headers(response)
        # The route's rule, never the path: paths carry learner ids.
        rule = request.url_rule
        endpoint = rule.rule if rule else "unmatched"
        method, status = request.method, response.status_code
        duration = time.perf_counter() - g.get("started", time.perf_counter())
        timer = timers.get((endpoint, method, status))
        if timer is None:
            timer = timers[(endpoint, method, status)] = REQUESTS.labels(endpoint, method, str(status))
        timer.observe(duration)
        if status == 503:
            UNAVAILABLE.inc()
        elif status == 409 and endpoint.endswith("/events"):
            CONFLICTS.inc()
        if log.isEnabledFor(logging.INFO):
            log.info(
                "request",
                extra={
                    "request_id": g.get("request_id"),
                    "endpoint": endpoint,
                    "method": method,
                    "status": status,
                    "duration_ms": round(duration * 1000, 2),
                },
            )
        return response

    app.add_url_rule("/metrics", "metrics", _metrics)


def _metrics() -> Response:
    """Prometheus text: loopback only, unless a token is configured (then the token)."""
    token = current_app.extensions["settings"].metrics_token
    if token:
        if request.headers.get("Authorization", "") != f"Bearer {token}":
            return Response(
                "metrics need 'Authorization: Bearer <WORKBENCH_METRICS_TOKEN>'\n",
                status=401,
                mimetype="text/plain",
                headers={"WWW-Authenticate": "Bearer"},
            )
    elif request.remote_addr not in ("127.0.0.1", "::1"):
        return Response(
            "metrics are served to loopback only unless WORKBENCH_METRICS_TOKEN is set\n",
            status=403,
            mimetype="text/plain",
        )
    return Response(_scrape(), mimetype=CONTENT_TYPE_LATEST)


def _scrape() -> bytes:
    if os.path.isdir(os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # every gunicorn worker's counts together
    else:
        from prometheus_client import REGISTRY as registry
    backlog = CollectorRegistry()
    gauge = Gauge(
        "workbench_xapi_outbox_backlog",
        "Statements waiting to be forwarded",
        ["platform"],
        registry=backlog,
        multiprocess_mode="livesum",
    )
    from .xapi_forward import backlog as compute_backlog

    try:
        for platform, waiting in compute_backlog(current_app.extensions["db"]).items():
            gauge.labels(platform).set(waiting)
    except Exception:  # noqa: BLE001 - a scrape still reports the rest when the database is down
        logging.getLogger(__name__).warning("outbox backlog unavailable for this scrape")
    return generate_latest(registry) + generate_latest(backlog)
