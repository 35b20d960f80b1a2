"""Event ingest over HTTP: gunicorn with 2 workers, SQLite (and PostgreSQL when configured).

1. Single events: wrk posts one new event per request (a fresh UUID each, made in Lua).
   Budget: >= 1,500 events/s.
2. Batches of 500 events from 4 client threads. Budget: >= 20,000 events/s.
Both then count the stored rows: every acknowledged event stored once, none lost.

    python bench/ingest.py [--seconds 10] [--json]   (WORKBENCH_BENCH_DATABASE_URL for PostgreSQL)
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import orjson
import requests
from sqlalchemy import create_engine, text

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.common import Gunicorn, emit, fresh_schema, migrated_sqlite  # noqa: E402
from service.db import Database  # noqa: E402
from service.db.platforms import create_key  # noqa: E402

SINGLE_BUDGET, BATCH_BUDGET, BATCH = 1500, 20000, 500
THREADS = 8  # as gunicorn.conf.py ships (WORKBENCH_THREADS), which this runs under

LUA = r"""
local counter = 0
local thread_id = 0
function setup(thread) thread:set("tid", math.random(1, 2^30)) end
function init(args) math.randomseed(tid) end
local function uuid4()
  local t = {}
  for i = 1, 16 do t[i] = math.random(0, 255) end
  t[7] = (t[7] % 16) + 64; t[9] = (t[9] % 64) + 128
  return string.format("%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
    t[1],t[2],t[3],t[4],t[5],t[6],t[7],t[8],t[9],t[10],t[11],t[12],t[13],t[14],t[15],t[16])
end
request = function()
  counter = counter + 1
  local body = '{"id":"' .. uuid4() .. '","learner":"bench-' .. (counter % 500) ..
    '","lesson":"multi-head-attention","checkpoint":"experiment","event":"parameter-changed",' ..
    '"instance_id":"multi-head-workbench","data":{"parameter":"token","value":' .. counter .. '},' ..
    '"occurred_at":"OCCURRED"}'
  return wrk.format("POST", nil, {["Content-Type"]="application/json", ["Authorization"]="Bearer TOKEN"}, body)
end
"""


def stored_count(url: str) -> int:
    engine = create_engine(url)
    with engine.connect() as conn:
        n = conn.execute(text("SELECT count(*) FROM events")).scalar_one()
    engine.dispose()
    return n


def prepare(url: str) -> str:
    if url.startswith("postgresql"):
        fresh_schema(url)
    db = Database(url)
    with db.write() as session:
        key, _ = create_key(session, f"bench-{uuid.uuid4().hex[:6]}", frozenset({"events:write"}))
    db.dispose()
    return key.token


def single(url: str, backend: str, seconds: int) -> dict:
    name = f"ingest, single events over HTTP, gunicorn 2 workers, {backend}"
    if not shutil.which("wrk"):
        return {
            "name": name,
            "skipped": "wrk is not installed (apt-get install wrk)",
            "budget": f">= {SINGLE_BUDGET}/s",
        }
    token = prepare(url)
    script = Path(tempfile.mkdtemp()) / "single.lua"
    now = dt.datetime.now(dt.UTC).isoformat()
    script.write_text(LUA.replace("TOKEN", token).replace("OCCURRED", now))
    before = stored_count(url)
    env = {"WORKBENCH_DATABASE_URL": url, "WORKBENCH_RATELIMIT_ENABLED": "0"}
    with Gunicorn("service.app:create_app()", env, threads=THREADS) as app:
        out = subprocess.run(
            ["wrk", "-t2", "-c32", f"-d{seconds}s", "-s", str(script), app.url + "/api/v1/events"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    total = int(re.search(r"(\d+) requests in", out).group(1))
    non2xx = int(m.group(1)) if (m := re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)) else 0
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    stored = stored_count(url) - before
    ok_responses = total - non2xx
    return {
        "name": name,
        "figure": round(rate),
        "unit": "events/s",
        "baseline": "budget",
        "baseline_figure": SINGLE_BUDGET,
        "ratio": round(rate / SINGLE_BUDGET, 2),
        "budget": f">= {SINGLE_BUDGET}/s, 0 lost",
        "ok": rate >= SINGLE_BUDGET and non2xx == 0 and stored >= ok_responses,
        "acknowledged": ok_responses,
        "stored": stored,
        "errors": non2xx,
    }


def batched(url: str, backend: str, seconds: int) -> dict:
    token = prepare(url)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    now = dt.datetime.now(dt.UTC).isoformat()
    before = stored_count(url)
    acknowledged = [0]
    errors = [0]
    lock = threading.Lock()
    env = {"WORKBENCH_DATABASE_URL": url, "WORKBENCH_RATELIMIT_ENABLED": "0"}
    with Gunicorn("service.app:create_app()", env, threads=THREADS) as app:
        deadline = time.monotonic() + seconds

        def client(n: int) -> None:
            session = requests.Session()
            i = 0
            while time.monotonic() < deadline:
                events = [
                    {
                        "id": str(uuid.uuid4()),
                        "learner": f"bench-{n}-{i % 50}",
                        "lesson": "multi-head-attention",
                        "checkpoint": "experiment",
                        "event": "parameter-changed",
                        "instance_id": "multi-head-workbench",
                        "data": {"value": i},
                        "occurred_at": now,
                    }
                    for i in range(i, i + BATCH)
                ]
                i += BATCH
                response = session.post(
                    app.url + "/api/v1/events", data=orjson.dumps({"events": events}), headers=headers
                )
                with lock:
                    if response.status_code == 201:
                        acknowledged[0] += BATCH
                    else:
                        errors[0] += 1

        start = time.monotonic()
        threads = [threading.Thread(target=client, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - start
    stored = stored_count(url) - before
    rate = acknowledged[0] / elapsed
    return {
        "name": f"ingest, batches of {BATCH}, gunicorn 2 workers, {backend}",
        "figure": round(rate),
        "unit": "events/s",
        "baseline": "budget",
        "baseline_figure": BATCH_BUDGET,
        "ratio": round(rate / BATCH_BUDGET, 2),
        "budget": f">= {BATCH_BUDGET}/s, 0 lost",
        "ok": rate >= BATCH_BUDGET and errors[0] == 0 and stored == acknowledged[0],
        "acknowledged": acknowledged[0],
        "stored": stored,
        "errors": errors[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    backends = [("SQLite", migrated_sqlite())]
    pg = os.environ.get("WORKBENCH_BENCH_DATABASE_URL")
    if pg:
        backends.append(("PostgreSQL", pg))
    for backend, url in backends:
        emit(single(url, backend, args.seconds), args.json)
        emit(batched(url, backend, args.seconds), args.json)


if __name__ == "__main__":
    main()
