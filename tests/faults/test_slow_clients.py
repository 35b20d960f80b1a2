"""Behind the buffering nginx of docker-compose (deploy/nginx.conf, run here with Debian's nginx):
clients that read nothing or trickle their bodies hold nginx connections, never gunicorn threads,
so another client's events and the health probe keep answering."""

from __future__ import annotations

import http.client
import shutil
import socket
import statistics
import subprocess
import time
from pathlib import Path

import orjson
import pytest

from ..api.helpers import event
from ..live import LiveServer, free_port
from .test_worker_kills import make_key

ROOT = Path(__file__).resolve().parents[2]
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
pytestmark = pytest.mark.databases


@pytest.fixture
def proxied(tmp_path, database_url):
    if not Path(NGINX).exists():
        pytest.skip("needs Debian's nginx (apt-get install -y nginx-light; .ci/run installs it)")
    server = LiveServer(
        {"WORKBENCH_DATABASE_URL": database_url, "WORKBENCH_RATELIMIT_ENABLED": "0"}, workers=2, threads=4
    ).start()
    port = free_port()
    site = (ROOT / "deploy" / "nginx.conf").read_text()
    site = site.replace("server api:8000;", f"server 127.0.0.1:{server.port};").replace(
        "listen 80;", f"listen 127.0.0.1:{port};"
    )
    (tmp_path / "site.conf").write_text(site)
    temp = {name: tmp_path / name for name in ("body", "proxy", "fastcgi", "uwsgi", "scgi")}
    for path in temp.values():
        path.mkdir()
    (tmp_path / "nginx.conf").write_text(
        f"""worker_processes 1;
pid {tmp_path}/nginx.pid;
error_log {tmp_path}/error.log warn;
daemon off;
events {{ worker_connections 1024; }}
http {{
  access_log off;
  client_body_temp_path {temp["body"]}; proxy_temp_path {temp["proxy"]};
  fastcgi_temp_path {temp["fastcgi"]}; uwsgi_temp_path {temp["uwsgi"]}; scgi_temp_path {temp["scgi"]};
  include {tmp_path}/site.conf;
}}
"""
    )
    nginx = subprocess.Popen([NGINX, "-c", str(tmp_path / "nginx.conf"), "-p", str(tmp_path)], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    yield server, port
    nginx.terminate()
    nginx.wait(timeout=10)
    server.stop()


def post_events(port: int, token: str, count: int) -> list[float]:
    """Another client (source 127.0.0.2: its own nginx budget, when nginx is there) records
    events; seconds each."""
    times = []
    for i in range(count):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30, source_address=("127.0.0.2", 0))
        start = time.monotonic()
        connection.request(
            "POST",
            "/api/v1/events",
            body=orjson.dumps(event(f"calm-{i}")),
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
        )
        response = connection.getresponse()
        response.read()
        times.append(time.monotonic() - start)
        assert response.status == 201, response.status
        connection.close()
    return times


def readers_that_read_nothing(port: int, body: dict, count: int) -> list[socket.socket]:
    """`count` clients that each send a trace request and never read a byte of the answer."""
    payload = orjson.dumps(body)
    head = (
        f"POST /api/v1/attention HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\n\r\n"
    ).encode()
    sockets = []
    for _ in range(count):
        s = socket.create_connection(("127.0.0.1", port))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(head + payload)
        sockets.append(s)
    return sockets


def test_readers_that_read_nothing_hold_no_gunicorn_thread(proxied, database_url):
    server, port = proxied
    token = make_key(database_url)
    body = {"tokens": [[0.1 * (i % 7)] * 16 for i in range(160)], "heads": 4}  # about 6 MB of JSON
    sockets = readers_that_read_nothing(port, body, 15)  # as many as the finding: more than 2 x 4 threads
    try:
        time.sleep(3)  # the traces are computed and sit in nginx's buffers
        times = post_events(port, token, 30)
        assert max(times) < 2.0, f"slowest event {max(times):.2f} s while 15 clients read nothing"
        health = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        health.request("GET", "/healthz")
        assert health.getresponse().status == 200
    finally:
        for s in sockets:
            s.close()


def test_bodies_that_trickle_hold_no_gunicorn_thread(proxied, database_url):
    server, port = proxied
    token = make_key(database_url)
    sockets = []
    for _ in range(30):  # more than the gunicorn threads, fewer than nginx's per-client cap
        s = socket.create_connection(("127.0.0.1", port))
        head = b"POST /api/v1/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        s.sendall(head + b"Content-Length: 5000\r\n\r\n{")
        sockets.append(s)
    try:
        time.sleep(1)
        for s in sockets:
            s.sendall(b" ")  # one byte now and then: the body never completes
        times = post_events(port, token, 30)
        assert max(times) < 2.0, f"slowest event {max(times):.2f} s while 30 clients trickle their bodies"
    finally:
        for s in sockets:
            s.close()


# -- without a proxy in front (make run, a bare gunicorn): the app's own socket timeouts --------


@pytest.fixture
def bare(database_url):
    server = LiveServer(
        {
            "WORKBENCH_DATABASE_URL": database_url,
            "WORKBENCH_RATELIMIT_ENABLED": "0",
            "WORKBENCH_CLIENT_STALL_SECONDS": "1",
            "WORKBENCH_BODY_SECONDS": "2",
        },
        workers=1,
        threads=2,
    ).start()
    yield server
    server.stop()


@pytest.mark.parametrize(
    "body",
    [
        {"tokens": [[0.1 * (i % 7)] * 16 for i in range(160)], "heads": 4},  # the background path: sendfile
        {"tokens": [[0.1 * (i % 7)] * 16 for i in range(120)], "heads": 4},  # a request thread: one write
    ],
    ids=["large-trace", "mid-size"],
)
def test_without_a_proxy_readers_that_stop_free_their_threads(bare, database_url, body):
    token = make_key(database_url)
    sockets = readers_that_read_nothing(bare.port, body, 4)  # twice the threads
    try:
        times = post_events(bare.port, token, 10)
        assert max(times) < 8.0, f"slowest event {max(times):.2f} s while 4 clients read nothing"
        assert statistics.median(times[5:]) < 1.0  # once the stalled writes timed out, nothing waits
    finally:
        for s in sockets:
            s.close()


def whole(answer: bytes) -> bool:
    """Head and body arrived (the server sends them in two writes: the head alone is not the answer)."""
    head, found, body = answer.partition(b"\r\n\r\n")
    length = next(
        (line.split(b":", 1)[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")), None
    )
    return bool(found) and length is not None and len(body) >= int(length)


def test_without_a_proxy_a_trickled_body_is_408_and_frees_its_thread(bare, database_url):
    token = make_key(database_url)
    sockets = []
    for _ in range(4):
        s = socket.create_connection(("127.0.0.1", bare.port))
        s.sendall(b"POST /api/v1/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n")
        s.sendall(b"Content-Length: 5000\r\n\r\n{")
        sockets.append(s)
    try:
        answers = [b""] * len(sockets)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not all(whole(a) for a in answers):
            for k, s in enumerate(sockets):
                try:
                    s.sendall(b" ")  # a byte every 0.3 s: never a stall, never the whole body
                    s.settimeout(0.01)
                    answers[k] += s.recv(65536)
                except (TimeoutError, BlockingIOError):
                    pass
                except OSError:  # the server answered and closed
                    continue
            time.sleep(0.3)
        for answer in answers:
            head, _, body = answer.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 408"), answer[:200]
            assert b"application/problem+json" in head and b"request-timeout" in body
        times = post_events(bare.port, token, 5)
        assert max(times) < 2.0
    finally:
        for s in sockets:
            s.close()
