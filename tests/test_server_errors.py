"""Errors gunicorn answers itself, and what reaches its log, with the shipped gunicorn.conf.py."""

from __future__ import annotations

import json
import logging
import socket

import pytest
import requests

from .api.helpers import event
from .live import sqlite_server


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    live = sqlite_server(tmp_path_factory.mktemp("gunicorn"), extra_args=["-c", "gunicorn.conf.py"])
    yield live
    live.stop()


def raw(server, request: bytes) -> tuple[str, dict[str, str], bytes]:
    """Send bytes as they are (no client library would send these) and read the whole answer."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    return status, headers, body


@pytest.mark.parametrize(
    "request_bytes, status",
    [
        (b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414),
        (b"POST /api/v1/events HTTP/1.1\r\nHost: x\r\nContent-Length: nine\r\n\r\n", 400),
        (b"POST /api/v1/events HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello", 400),
        (b"GET / HTTP/1.1\r\n" + b"".join(b"X-H%d: v\r\n" % i for i in range(80)) + b"\r\n", 431),
        (b"GARBAGE\r\n\r\n", 400),
    ],
    ids=["uri-too-long", "content-length-not-a-number", "two-content-lengths", "too-many-headers", "no-request-line"],
)
def test_errors_gunicorn_answers_itself_are_problem_json(server, request_bytes, status):
    line, headers, body = raw(server, request_bytes)
    assert line.split()[1] == str(status)
    assert headers["content-type"] == "application/problem+json"
    problem = json.loads(body)
    assert problem["status"] == status and problem["type"].startswith("https://") and problem["detail"]
    assert int(headers["content-length"]) == len(body)


def test_learner_ids_even_with_nul_bytes_never_reach_the_server_log(tmp_path):
    # gunicorn's log level as shipped (info): its debug level logs raw request lines
    server = sqlite_server(tmp_path, extra_args=["-c", "gunicorn.conf.py"], WORKBENCH_LOG_JSON="1")
    secret = "secret-learner-4711"
    session = requests.Session()
    learner = session.post(f"{server.url}/api/v1/session").json()["learner"]
    for path in (f"{secret}%00", secret, f"{secret}%00x/progress", f"{secret}%0a/events"):
        response = session.get(f"{server.url}/api/v1/learners/{path}")
        assert 400 <= response.status_code < 500
    session.post(f"{server.url}/api/v1/events", json=event(f"{secret}\u0000"))
    session.post(f"{server.url}/api/v1/events", json=event(secret))
    session.get(f"{server.url}/api/v1/learners/{learner}/events?cursor={secret}%00")
    session.get(f"{server.url}/api/v1/xapi/statements?agent={secret}%00")
    server.stop()
    log = server.proc.stderr.read().decode("utf-8", "replace")
    assert "/api/v1/learners/<string:learner>/events" in log  # the requests were logged, by their route
    assert secret not in log and learner not in log


def test_a_request_refused_before_any_view_still_has_an_id_and_a_duration(client, caplog):
    caplog.set_level(logging.INFO, logger="service.requests")
    response = client.get("/api/v1/learners/ada%00/events")
    assert response.status_code == 400
    assert len(response.headers["X-Request-Id"]) == 32
    record = next(r for r in caplog.records if r.name == "service.requests")
    assert record.request_id == response.headers["X-Request-Id"] and record.duration_ms >= 0
