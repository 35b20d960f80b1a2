"""Behind gunicorn: a chunked body over the size limit is refused, never silently truncated."""

import http.client
import json

import pytest

from ..live import LiveServer


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    db = tmp_path_factory.mktemp("chunked") / "wb.db"
    live = LiveServer({"WORKBENCH_DATABASE_URL": f"sqlite:///{db}", "WORKBENCH_MAX_CONTENT_LENGTH": "2000"}).start()
    yield live
    live.stop()


def post_chunked(server, payload: bytes, chunk: int = 256):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.putrequest("POST", "/api/v1/attention")
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Transfer-Encoding", "chunked")
    conn.endheaders()
    for i in range(0, len(payload), chunk):
        piece = payload[i : i + chunk]
        conn.send(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
    conn.send(b"0\r\n\r\n")
    response = conn.getresponse()
    body = response.read()
    conn.close()
    return response.status, response.getheader("Content-Type"), body


def test_chunked_body_within_the_limit_is_computed(server):
    status, _, body = post_chunked(server, json.dumps({"tokens": [[1, 2, 10, 20]], "heads": 2}).encode())
    assert status == 200
    assert json.loads(body)["concat"] == [[1, 2, 10, 20]]


def test_chunked_body_over_the_limit_is_413_not_truncated(server):
    # A valid JSON prefix up to the limit would parse if truncated at the right place;
    # here the body is long, the first 2000 bytes are not JSON: either way it must be 413.
    rows = [[0.5, 0.25, 0.125, 0.0625]] * 200
    status, content_type, body = post_chunked(server, json.dumps({"tokens": rows, "heads": 2}).encode())
    assert status == 413
    assert content_type.startswith("application/problem+json")
    assert "2000 bytes" in json.loads(body)["detail"]


def test_content_length_over_the_limit_is_413(server):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    payload = json.dumps({"tokens": [[0.5] * 4] * 200, "heads": 2}).encode()
    conn.request("POST", "/api/v1/attention", body=payload, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    assert response.status == 413
    response.read()
    conn.close()
