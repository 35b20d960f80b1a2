"""Security headers, request ids, JSON logs without learner ids, Prometheus metrics."""

import json
import logging

from service.app import create_app
from service.observability import JsonFormatter

from .api.helpers import event


def test_security_headers_on_pages_and_api(client):
    for path in ("/", "/api/v1/lessons", "/api/v1/nope"):
        response = client.get(path)
        csp = response.headers["Content-Security-Policy"]
        assert "default-src 'self'" in csp and "script-src 'self'" in csp and "frame-ancestors 'self'" in csp
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        response.close()


def test_frame_ancestors_are_configurable_for_embedding_platforms(app_config):
    client = create_app({**app_config, "frame_ancestors": ["https://lms.example.org"]}).test_client()
    response = client.get("/explorables/multi-head-attention")
    assert "frame-ancestors 'self' https://lms.example.org" in response.headers["Content-Security-Policy"]
    response.close()


def test_production_cookies_are_secure(monkeypatch, tmp_path):
    app = create_app(
        {
            "env": "production",
            "secret_key": "s" * 40,
            "public_url": "https://wb.example",
            "database_url": f"sqlite:///{tmp_path}/p.db",
        }
    )
    assert app.config["SESSION_COOKIE_SECURE"] is True and app.config["SESSION_COOKIE_SAMESITE"] == "Lax"


def test_request_ids_are_echoed_or_made(client):
    mine = client.get("/healthz", headers={"X-Request-Id": "abc-12345678"})
    assert mine.headers["X-Request-Id"] == "abc-12345678"
    made = client.get("/healthz", headers={"X-Request-Id": "bad id with spaces"})
    assert len(made.headers["X-Request-Id"]) == 32


def test_request_logs_are_json_and_name_the_route_not_the_path(client, acme, caplog):
    caplog.set_level(logging.INFO, logger="service.requests")
    client.post("/api/v1/events", json=event("learner-secret-9"), headers=acme)
    client.get("/api/v1/learners/learner-secret-9/progress", headers=acme)
    records = [r for r in caplog.records if r.name == "service.requests"]
    lines = [json.loads(JsonFormatter().format(r)) for r in records]
    assert {line["endpoint"] for line in lines} >= {"/api/v1/events", "/api/v1/learners/<string:learner>/progress"}
    assert lines and all(line["request_id"] and line["duration_ms"] >= 0 for line in lines)
    assert "learner-secret-9" not in caplog.text and acme["Authorization"][7:] not in caplog.text


def test_metrics_on_loopback_list_requests_and_events(client, acme):
    client.post("/api/v1/events", json=event(), headers=acme)
    body = client.get("/metrics").data.decode()
    assert "workbench_request_seconds_bucket" in body
    assert 'workbench_events_total{outcome="created"}' in body
    assert "workbench_xapi_outbox_backlog" in body or "# HELP workbench_xapi_outbox_backlog" in body


def test_metrics_need_the_token_when_one_is_set(app_config):
    client = create_app({**app_config, "metrics_token": "t0ken"}).test_client()
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", headers={"Authorization": "Bearer t0ken"}).status_code == 200


def test_metrics_are_not_served_to_other_addresses_without_a_token(client):
    assert client.get("/metrics", environ_base={"REMOTE_ADDR": "203.0.113.9"}).status_code == 403
