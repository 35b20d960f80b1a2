"""Slow clients against the default server, with no proxy in front (issue 31): forty connections
that send their headers and `{`, then a byte every 5 s, and reconnect when refused, while a
probe asks /healthz every half second. Run against `workbench serve` (what `make run` starts) and
against gunicorn with the shipped gunicorn.conf.py; on the old gthread worker /healthz failed 68
of 70 samples."""

from __future__ import annotations

import http.client
import io
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import requests

from service.server.wire import arrived, continue_now, early_answer
from service.server.worker import PIECE

from ..live import free_port

ROOT = Path(__file__).resolve().parents[2]
# The servers under test give a body 10 s to arrive (30 s by default: the same code, sooner), and the
# probe runs past it: the tricklers are cut off and come back.
TRICKLERS, BODY_SECONDS, SECONDS = 40, 10, 18


def trickle(port: int, stop: threading.Event) -> None:
    head = (
        b"POST /api/v1/attention HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 100000\r\n\r\n{"
    )
    while not stop.is_set():
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
                conn.sendall(head)
                while not stop.wait(5):
                    conn.sendall(b" ")
        except OSError:  # refused, cut off after its deadline: come back, as the probe's attacker did
            stop.wait(0.5)


def probe(url: str, seconds: float) -> list[float | None]:
    """Each /healthz's time to answer (None: failed or over 1 s)."""
    times: list[float | None] = []
    ends = time.monotonic() + seconds
    while time.monotonic() < ends:
        started = time.monotonic()
        try:
            ok = requests.get(url + "/healthz", timeout=1).status_code == 200
            times.append(time.monotonic() - started if ok else None)
        except requests.RequestException:
            times.append(None)
        time.sleep(0.5)
    return times


def serve(command: list[str], port: int, tmp_path: Path) -> subprocess.Popen:
    from service.db.migrate import upgrade

    url = f"sqlite:///{tmp_path / 'wb.db'}"
    upgrade(url)
    env = {
        **os.environ,
        "WORKBENCH_DATABASE_URL": url,
        "WORKBENCH_ENV": "testing",
        "WORKBENCH_PORT": str(port),
        "WORKBENCH_BODY_SECONDS": str(BODY_SECONDS),
    }
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if requests.get(f"http://127.0.0.1:{port}/healthz", timeout=(1, 10)).status_code == 200:
                return proc  # a long read: fewer probes left counted by a worker still booting
        except requests.RequestException:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"the server did not start: {proc.stderr.read().decode()[-2000:]}")


SERVERS = {
    "make run (workbench serve)": lambda port: [
        str(Path(sys.executable).with_name("workbench")),
        "serve",
        "--no-migrate",
    ],
    "gunicorn -c gunicorn.conf.py": lambda port: [
        sys.executable,
        "-m",
        "gunicorn",
        "-c",
        "gunicorn.conf.py",
        "--bind",
        f"127.0.0.1:{port}",
        "service.app:create_app()",
    ],
}


@pytest.mark.slow
@pytest.mark.parametrize("server", sorted(SERVERS))
def test_health_answers_within_a_second_while_forty_clients_trickle(tmp_path, server):
    port = free_port()
    proc = serve(SERVERS[server](port), port, tmp_path)
    stop = threading.Event()
    threads = [threading.Thread(target=trickle, args=(port, stop), daemon=True) for _ in range(TRICKLERS)]
    try:
        for t in threads:
            t.start()
        time.sleep(1)
        times = probe(f"http://127.0.0.1:{port}", SECONDS)
        # and the service still computes while they trickle
        work = requests.post(
            f"http://127.0.0.1:{port}/api/v1/attention",
            json={"tokens": [[1.0, 0.0], [0.0, 1.0]], "heads": 1},
            timeout=5,
        )
    finally:
        stop.set()
        proc.terminate()
        proc.wait(timeout=30)
    answered = [t for t in times if t is not None]
    assert len(answered) >= 0.95 * len(times), f"{len(times) - len(answered)} of {len(times)} probes failed"
    assert work.status_code == 200


def test_a_request_that_has_not_arrived_whole_waits_in_the_main_loop():
    head = b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n"
    assert not arrived(b"POST /x HTTP/1.1\r\nHost:", 100, 8192)  # the headers are still coming
    assert not arrived(head + b"{", 100, 8192)
    assert arrived(head + b"{}   ", 100, 8192)
    assert arrived(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", 100, 8192)  # no body
    chunked = b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
    assert not arrived(chunked + b"2\r\n{}\r\n", 100, 8192)
    assert arrived(chunked + b"2\r\n{}\r\n0\r\n\r\n", 100, 8192)


def test_what_the_thread_refuses_at_once_goes_to_it_at_once():
    assert arrived(b"POST /x HTTP/1.1\r\nContent-Length: 999999\r\n\r\n{", 1000, 8192)  # over the limit: 413
    chunked = b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
    assert arrived(chunked + b"zz\r\n", 100, 8192)  # not a size line: refused without reading on


def test_the_main_loop_answers_100_continue_itself_and_waits_for_the_body():
    head = b"POST /x HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n"
    assert not arrived(head, 100, 8192)  # a thread would wait for the body: the main loop does
    kept = continue_now(head, 100)
    assert kept == b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n"  # the thread does not ask again
    assert continue_now(kept, 100) is None and not arrived(kept, 100, 8192) and arrived(kept + b"{}   ", 100, 8192)
    over = b"POST /x HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 500\r\n\r\n"
    assert continue_now(over, 100) is None and arrived(over, 100, 8192)  # the thread refuses it: 413


def test_a_chunked_body_arrives_by_its_framing_not_by_a_line_that_looks_like_the_end():
    chunked = b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
    assert not arrived(chunked + b"3e8\r\n{}\r\n0\r\n\r\n", 10_000, 8192)  # 1,000 bytes declared, 2 sent
    assert arrived(chunked + b"2\r\n{}\r\n1;ext=1\r\n \r\n0\r\n\r\n", 100, 8192)
    assert not arrived(chunked + b"2\r\n{}\r\n0\r\n", 100, 8192)  # the trailers' end is still coming
    assert early_answer(chunked + b"ffffff\r\n{", 100, 8192).startswith(b"HTTP/1.1 413 ")


def test_headers_past_their_limit_are_answered_by_the_main_loop():
    assert early_answer(b"GET / HTTP/1.1\r\nX: " + b"a" * 9000, 100, 8192).startswith(b"HTTP/1.1 431 ")
    assert early_answer(b"GET / HTTP/1.1\r\nX: " + b"a" * 100, 100, 8192) is None  # still coming, within it


# Every way of holding a connection without sending a whole request (issue 40), 32 connections at
# once: each must wait in the main loop (and meet its deadline), never in a thread.
HEADER_LIMIT = 8190 + 64 * 8192  # gunicorn.conf.py's request line and fields


def hold(shape: str, port: int, source: str, stop: threading.Event) -> None:
    head = b"POST /api/v1/attention HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    first = {
        "100-continue": head + b"Expect: 100-continue\r\nContent-Length: 40\r\n\r\n",
        "lying chunks": head + b"Transfer-Encoding: chunked\r\n\r\n3e8\r\n{}\r\n0\r\n\r\n",
        "headers at the limit": b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + b"X-Pad: " + b"a" * 8000 + b"\r\n",
        "pipelined partial": b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" + head + b"Content-Length: 40\r\n\r\n{",
    }[shape]
    while not stop.is_set():
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0)) as conn:
                conn.sendall(first)
                sent = len(first)
                while not stop.wait(2):
                    if shape == "headers at the limit" and sent < HEADER_LIMIT - 9000:
                        pad = b"X-Pad: " + b"a" * 8000 + b"\r\n"  # just under the limit, a field at a time
                        conn.sendall(pad)
                        sent += len(pad)
                    else:
                        conn.sendall(b" ")
        except OSError:  # refused, or cut off at its deadline: come back
            stop.wait(0.5)


SHAPES = ["100-continue", "lying chunks", "headers at the limit", "pipelined partial"]


@pytest.mark.slow
@pytest.mark.parametrize("addresses", [1, 8], ids=["one address", "eight addresses"])
def test_health_answers_while_32_connections_hold_every_slow_shape(tmp_path, addresses):
    port = free_port()
    proc = serve(SERVERS["make run (workbench serve)"](port), port, tmp_path)
    try:
        for shape in SHAPES:
            stop = threading.Event()
            sources = [f"127.0.0.{2 + k % addresses}" for k in range(32)]
            threads = [threading.Thread(target=hold, args=(shape, port, s, stop), daemon=True) for s in sources]
            for t in threads:
                t.start()
            time.sleep(1)
            times = probe(f"http://127.0.0.1:{port}", 6)
            stop.set()
            for t in threads:
                t.join(timeout=15)
            answered = [t for t in times if t is not None]
            assert len(answered) >= 0.95 * len(times), f"{shape}: {len(times) - len(answered)} of {len(times)} failed"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def hold_a_request_open(port: int) -> socket.socket:
    conn = socket.create_connection(("127.0.0.1", port), timeout=5)
    conn.sendall(b"POST /api/v1/attention HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{")
    return conn


def still_open(conn: socket.socket) -> bool:
    """Nothing to read yet (the server waits for the rest of the body), not closed or reset."""
    conn.settimeout(0)  # a timeout would wait for something to read
    try:
        return conn.recv(1, socket.MSG_PEEK) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        conn.settimeout(5)


def test_one_address_holds_only_so_many_connections(tmp_path):
    port = free_port()
    command = SERVERS["gunicorn -c gunicorn.conf.py"](port)
    proc = serve(
        [
            "env",
            "WORKBENCH_CONNECTIONS_PER_ADDRESS=4",
            "WORKBENCH_FORWARDED_ALLOW_IPS=10.9.9.9",
            "WORKBENCH_WORKERS=1",
            *command,
        ],
        port,
        tmp_path,
    )
    held: list[socket.socket] = []
    try:
        # Readiness probes that timed out while the worker booted are still counted until the worker
        # has answered them and seen them close: until four connections are all held, try again.
        for _ in range(20):
            for conn in held:
                conn.close()
            held = [hold_a_request_open(port) for _ in range(4)]
            time.sleep(0.5)
            if all(map(still_open, held)):
                break
        else:
            pytest.fail("the server never held four connections from one address")
        refused = socket.create_connection(("127.0.0.1", port), timeout=5)
        try:
            refused.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = refused.recv(100)
        except ConnectionResetError:  # closed with our request unread: a reset
            answer = b""
        assert answer == b""  # closed without an answer
        refused.close()
        held.pop().close()  # a place comes free
        time.sleep(0.5)
        assert requests.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200
    finally:
        for conn in held:
            conn.close()
        proc.terminate()
        proc.wait(timeout=30)


def test_a_large_body_sent_in_pieces_and_a_request_pipelined_behind_it_are_both_answered(tmp_path, client):
    """The main loop holds the body while it arrives; the thread's parser gets it a piece at a
    time (service/server/worker.py HeldUnreader) and then finds the pipelined request behind it."""
    port = free_port()
    proc = serve(SERVERS["gunicorn -c gunicorn.conf.py"](port), port, tmp_path)
    tokens = np.random.default_rng(7).normal(size=(120, 512)).round(4).tolist()
    body = json.dumps({"tokens": tokens, "heads": 2}).encode()  # about 900 kB: fourteen pieces and more
    head = b"POST /api/v1/attention HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
    body += b" " * (-(len(head % len(body)) + len(body)) % PIECE)  # it ends where a piece ends: nothing of it
    first = head % len(body) + body  # is left in gunicorn's buffer, the next request is all still held
    assert len(first) % PIECE == 0
    second = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    wire = first + second
    received = bytearray()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=20) as conn:
            for start in range(0, len(wire), 150_001):  # uneven pieces, with pauses between them
                conn.sendall(wire[start : start + 150_001])
                time.sleep(0.05)
            while data := conn.recv(1 << 20):
                received += data
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    wire_back = io.BytesIO(bytes(received))
    wire_back.close = lambda: None  # http.client closes its file after each answer: the next one follows
    answers = []
    for _ in range(2):  # the two answers, one after the other on the one connection
        response = http.client.HTTPResponse(SimpleNamespace(makefile=lambda *_: wire_back))
        response.begin()
        answers.append((response.status, response.read()))
    assert [status for status, _ in answers] == [200, 200], answers[0][1][:300]
    answer = json.loads(answers[0][1])
    assert json.loads(answers[1][1])["status"] == "ok"
    expected = client.post("/api/v1/attention", json={"tokens": tokens, "heads": 2}).get_json()
    assert answer["output"] == expected["output"]


def test_an_upload_refused_while_it_is_still_sent_gets_its_answer(tmp_path):
    """The main loop refuses a chunked upload by its first size line while the client is still
    sending: closing on unread bytes would reset the connection, the client's next send would fail
    (a client such as `requests` then reports a connection error and never reads the 413), so the
    close lingers, draining what still comes, until the client is done."""
    port = free_port()
    proc = serve(SERVERS["make run (workbench serve)"](port), port, tmp_path)
    try:
        for _ in range(10):
            with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
                head = b"POST /api/v1/attention HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                conn.sendall(head + b"Transfer-Encoding: chunked\r\n\r\nffffff\r\n")
                time.sleep(0.05)  # answered and shut for writing by now
                for _ in range(16):
                    conn.sendall(b"a" * 32768)  # half a megabyte still coming: no reset
                answer = conn.recv(4096)
            assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


# -- answers nobody reads, pipelining, bodies in memory (issue 49) -------------------------------

UNREAD = b"GET /api/docs/assets/swagger-ui-bundle.js HTTP/1.1\r\nHost: x\r\n\r\n" * 20  # 1.4 MB answers, pipelined


def health_while(tmp_path, client, count: int, *extra, settle: float, seconds: float) -> tuple[list, bytes]:
    """/healthz's times (as `probe`) while `count` connections from four /24 networks run `client(port,
    source, stop, *extra)` against the default server (`make run`), and what the server wrote to stderr."""
    port = free_port()
    proc = serve(SERVERS["make run (workbench serve)"](port), port, tmp_path)
    stop = threading.Event()
    sources = [f"127.0.{1 + k % 4}.{2 + k // 4}" for k in range(count)]
    threads = [threading.Thread(target=client, args=(port, s, stop, *extra), daemon=True) for s in sources]
    try:
        for t in threads:
            t.start()
        time.sleep(settle)
        times = probe(f"http://127.0.0.1:{port}", seconds)
    finally:
        stop.set()
        proc.terminate()
        _, errors = proc.communicate(timeout=30)
    return times, errors


def never_read(port: int, source: str, stop: threading.Event) -> None:
    """Pipeline GETs of a large static file and never read an answer; reconnect when cut off."""
    while not stop.is_set():
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0)) as conn:
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                conn.sendall(UNREAD)
                stop.wait(120)
        except OSError:
            stop.wait(0.5)


@pytest.mark.slow
def test_health_answers_while_forty_connections_from_four_networks_never_read_their_answers(tmp_path):
    """The finding: forty connections from four /24 networks pipelining GETs (the API reference's
    assets, pages: no rate limit) and never reading held all 16 threads of the default server, so
    /healthz answered 6 of 34 times. Now a thread writes its answer into memory and the main loop
    sends it, within the send deadline; each connection's next request waits until it is sent."""
    times, _ = health_while(tmp_path, never_read, 40, settle=2, seconds=15)
    answered = [t for t in times if t is not None]
    assert len(answered) >= 0.95 * len(times), f"{len(times) - len(answered)} of {len(times)} probes failed"


LARGE = json.dumps({"tokens": np.random.default_rng(5).normal(size=(256, 64)).round(2).tolist(), "heads": 8}).encode()
POSTED = b"POST /api/v1/attention HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
POSTED += b"Content-Length: %d\r\n\r\n%s" % (len(LARGE), LARGE)  # a 256 x 64, 8-head trace: a 25 MB answer


def never_read_a_large_answer(port: int, source: str, stop: threading.Event, answered: list[bool]) -> None:
    """Post a request whose answer is 25 MB and never read it; reconnect when cut off."""
    while not stop.is_set():
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0)) as conn:
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                conn.sendall(POSTED)
                computed = conn.recv(12).startswith(b"HTTP/1.1 200")  # its first bytes, nothing more
                answered.append(computed)
                stop.wait(120 if computed else 0.5)  # refused (no slot came free): comes back, as an attacker would
        except OSError:
            stop.wait(0.5)


@pytest.mark.slow
def test_health_answers_while_32_connections_never_read_their_25_megabyte_answers(tmp_path):
    """Issue 66, H2: an answer past the 4 MiB room was sent by its request thread, which waited the 30 s
    stall timeout on a client that does not read: 32 connections from four networks kept /healthz at 1 of
    13. Now such an answer goes to a temporary file the main loop sends; no thread waits on a reader."""
    answered: list[bool] = []
    times, errors = health_while(tmp_path, never_read_a_large_answer, 32, answered, settle=3, seconds=12)
    assert sum(answered) >= 8  # large answers really were computed and started on their way
    ok = [t for t in times if t is not None]
    assert len(ok) >= 0.95 * len(times), f"{len(times) - len(ok)} of {len(times)} probes failed"
    assert b"Traceback" not in errors  # no thread timed out sending (L4)


def declare_and_wait(port: int, source: str, size: int, held: list, stop: threading.Event) -> None:
    """Declare a body of `size`, send a few bytes of it, and hold the connection (the finding's H1)."""
    conn = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))
    conn.sendall(b"POST /api/v1/attention HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n")
    conn.sendall(b'Content-Length: %d\r\n\r\n{"tokens": [' % size)
    held.append(conn)
    stop.wait(60)


@pytest.mark.slow
def test_bodies_declared_large_and_never_sent_leave_room_for_another_networks_posts(tmp_path):
    """Issue 66, H1: the body budget was reserved by each request's declared length, so one address with
    about 90 connections declaring 4 MiB and sending a few bytes made every other client's POST a 503
    until its connections timed out. Now a request holds what has arrived and a 64 KB first share."""
    port = free_port()
    proc = serve([*SERVERS["make run (workbench serve)"](port), "--workers", "1"], port, tmp_path)  # one budget
    stop, held = threading.Event(), []
    try:
        # 4 MiB declared, then halving to fill the gaps, as the probe did: 100 of the 128 one address may hold
        sizes = [4 * 2**20] * 70 + [2**k for k in range(21, 6, -1) for _ in range(2)]
        for size in sizes:
            args = (port, "127.0.9.2", size, held, stop)
            threading.Thread(target=declare_and_wait, args=args, daemon=True).start()
            time.sleep(0.01)
        deadline = time.monotonic() + 10
        while len(held) < 100 and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.5)
        statuses = []
        for _ in range(20):  # another network's learner, meanwhile
            other = http.client.HTTPConnection("127.0.0.1", port, timeout=10, source_address=("127.0.10.2", 0))
            other.request(
                "POST",
                "/api/v1/attention",
                body=b'{"tokens": [[1, 0], [0, 1]], "heads": 1}',
                headers={"Content-Type": "application/json"},
            )
            statuses.append(other.getresponse().status)
            other.close()
    finally:
        stop.set()
        for conn in held:
            conn.close()
        proc.terminate()
        proc.wait(timeout=30)
    assert len(held) == 100 and statuses == [200] * 20


def test_a_connection_serves_at_most_a_hundred_requests_then_closes(tmp_path):
    """Pipelined requests per connection are bounded, as nginx's keepalive_requests: the hundredth
    answer is the last, it says so ("Connection: close", so a client with a pool of connections
    opens another instead of sending into a closed one), and the connection closes after it."""
    port = free_port()
    proc = serve(SERVERS["make run (workbench serve)"](port), port, tmp_path)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
            conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" * 150)
            received = b""
            while chunk := conn.recv(65536):
                received += chunk
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert received.count(b"HTTP/1.1 200 ") == 100
    answers = received.split(b"HTTP/1.1 200 ")[1:]
    assert b"Connection: close" in answers[-1] and not any(b"Connection: close" in a for a in answers[:-1])


DECODE = json.dumps({"tokens": np.random.default_rng(8).normal(size=(96, 64)).round(2).tolist(), "heads": 8})
PADDED_DECODE = (DECODE + " " * (4 * 2**20 - 4096 - len(DECODE))).encode()  # near the body limit, mostly padding


def decode_burst(port: int) -> list[int]:
    """24 of the heaviest decodes the server accepts (5.5 MB answers), padded near the body limit, four at a
    time from six addresses; their statuses."""

    def one(k: int) -> int:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60, source_address=(f"127.0.8.{2 + k % 6}", 0))
        conn.request(
            "POST", "/api/v1/attention/decode", body=PADDED_DECODE, headers={"Content-Type": "application/json"}
        )
        answer = conn.getresponse()
        answer.read()
        conn.close()
        return answer.status

    with ThreadPoolExecutor(4) as pool:
        return list(pool.map(one, range(24)))


def rss_of_children(pid: int) -> int:
    """The largest resident set of `pid`'s children (the workers), in bytes."""
    children = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    most = 0
    for child in children:
        try:
            status = Path(f"/proc/{child}/status").read_text()
        except OSError:
            continue
        kb = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
        most = max(most, kb * 1024)
    return most


def send_slowly(port: int, source: str, answers: list[bytes]) -> None:
    """A four-megabyte body in 64 KB pieces over about eight seconds, reading an answer as soon as
    one comes (a refusal comes before the body is whole)."""
    import select

    head = b"POST /api/v1/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    head += b"Content-Length: 4000000\r\n\r\n"
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=30, source_address=(source, 0)) as conn:
            conn.sendall(head)
            piece = b" " * 65536
            for sent in range(0, 4_000_000, 65536):
                if select.select([conn], [], [], 0.13)[0]:
                    break  # answered before the body was whole
                conn.sendall(piece[: min(65536, 4_000_000 - sent)])
            answers.append(conn.recv(400))
    except OSError as exc:
        answers.append(repr(exc).encode())


@pytest.mark.slow
def test_192_four_megabyte_bodies_in_flight_keep_the_worker_under_its_memory_budget(tmp_path):
    """The finding: the main loop held every arriving body until it was whole; 192 connections from
    12 addresses grew one worker from 114 to 517 MB. Now a worker holds at most
    WORKBENCH_CLIENT_BYTES_PER_WORKER (128 MiB) of bodies and unsent answers; past it a new body is a
    503 with Retry-After, and the worker stays under its 512 MiB."""
    port = free_port()
    command = ["env", "WORKBENCH_WORKERS=1", *SERVERS["make run (workbench serve)"](port)]
    proc = serve(command, port, tmp_path)
    decoded = decode_burst(port)  # first the heaviest decodes it accepts (issue 66: it kept about 430 MB after)
    answers: list[bytes] = []
    sources = [f"127.0.9.{2 + k % 12}" for k in range(192)]
    threads = [threading.Thread(target=send_slowly, args=(port, s, answers), daemon=True) for s in sources]
    peak = 0
    try:
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):
            peak = max(peak, rss_of_children(proc.pid))
            time.sleep(0.2)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert decoded == [200] * 24
    assert peak < 512 * 1024 * 1024, f"a worker reached {peak / 2**20:.0f} MiB"
    refused = [a for a in answers if a.startswith(b"HTTP/1.1 503")]
    assert refused and all(b"Retry-After" in a for a in refused)  # past the budget: told to come back
    assert len(answers) == 192


@pytest.mark.slow
def test_an_answer_not_read_within_the_send_deadline_is_cut_with_one_warning_line_and_counted(tmp_path, monkeypatch):
    """Issue 66, L4: a client that does not read its answer is cut at the send deadline: one warning line
    (no traceback), and `workbench_answers_cut_total` in the metrics says how often."""
    monkeypatch.setenv("WORKBENCH_SEND_SECONDS", "2")
    port = free_port()
    proc = serve(SERVERS["make run (workbench serve)"](port), port, tmp_path)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            conn.sendall(POSTED)
            assert conn.recv(12).startswith(b"HTTP/1.1 200")  # the 25 MB answer started, never read
            deadline = time.monotonic() + 15
            counted = 0.0
            while counted < 1 and time.monotonic() < deadline:
                time.sleep(0.5)
                metrics = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
                found = re.search(r"^workbench_answers_cut_total ([0-9.]+)$", metrics, re.M)
                counted = float(found.group(1)) if found else 0.0
    finally:
        proc.terminate()
        _, errors = proc.communicate(timeout=30)
    assert counted == 1
    assert errors.count(b"its answer was not read within 2 s") == 1 and b"Traceback" not in errors
