"""JSON logs without learner ids or keys, the security headers, Prometheus metrics and their
endpoint. The edge (service/edge) gives every request its id, headers, metrics and log line."""

from __future__ import annotations

import json
import logging
import os

from flask import Flask, Response, current_app, request
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)

REQUESTS = Histogram(
    "workbench_request_seconds",
    "Request latency by endpoint",
    ["endpoint", "method", "status"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
EVENTS = Counter("workbench_events_total", "Events by outcome", ["outcome"])  # created, duplicate, erased
CONFLICTS = Counter("workbench_event_conflicts_total", "Requests refused with 409 (same id, other content)")
UNAVAILABLE = Counter("workbench_unavailable_total", "Responses 503: the database did not answer")
QUOTA_REFUSALS = Counter("workbench_quota_refusals_total", "Writes refused by a storage quota (429 or 413)", ["quota"])
QUOTA_ALARMS = Counter(
    "workbench_quota_alarms_total",
    "Writes past a quota that alarms instead of refusing (the web platform's)",
    ["quota"],
)
CUT_ANSWERS = Counter(
    "workbench_answers_cut_total", "Connections closed: their answer not read within the send deadline"
)
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


def init_app(app: Flask) -> None:
    """The metrics endpoint (the edge records every request: service/edge)."""
    app.add_url_rule("/metrics", "metrics", _metrics)


def operator() -> bool:
    """Whether the caller may see the infrastructure: the metrics token when one is configured,
    else a loopback address."""
    token = current_app.extensions["settings"].metrics_token
    if token:
        return request.headers.get("Authorization", "") == f"Bearer {token}"
    return request.remote_addr in ("127.0.0.1", "::1")


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
    from .xapi.forward import backlog as compute_backlog

    try:
        for platform, waiting in compute_backlog(current_app.extensions["db"]).items():
            gauge.labels(platform).set(waiting)
    except Exception:  # noqa: BLE001 - a scrape still reports the rest when the database is down
        logging.getLogger(__name__).warning("outbox backlog unavailable for this scrape")
    _quota_gauges(backlog)
    return generate_latest(registry) + generate_latest(backlog)


def _quota_gauges(registry: CollectorRegistry) -> None:
    """Each storage quota's size, and how full its most used subject is this period."""
    import time

    from .db.quotas import fullest

    configured = current_app.extensions["quotas"]
    limit = Gauge("workbench_quota_limit", "Storage quota per period", ["quota", "period_seconds"], registry=registry)
    full = Gauge(
        "workbench_quota_fullest_ratio",
        "The most used subject's share of each storage quota this period (1: at the quota)",
        ["quota"],
        registry=registry,
    )
    for q in configured:
        limit.labels(q.name, str(q.seconds)).set(q.amount)
    try:
        with current_app.extensions["db"].read() as session:
            for name, ratio in fullest(session.connection(), configured, time.time()).items():
                full.labels(name).set(ratio)
    except Exception:  # noqa: BLE001 - as the backlog: the rest of the scrape still answers
        logging.getLogger(__name__).warning("storage quota usage unavailable for this scrape")
