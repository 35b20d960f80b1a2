"""The online-softmax exercise's `submit`, as a learner runs it: from the unpacked download, in a Python
that has numpy and nothing else (and from the TypeScript track), against a real server. The verdicts
expected are the slips each file was written to make; the server's checker is what is under test."""

from __future__ import annotations

import io
import json
import os
import subprocess
import zipfile
from pathlib import Path

import pytest
import requests

from service.compute.online import SLIPS

from ..live import sqlite_server
from .test_exercise import needs_typescript
from .test_online_softmax import EXERCISE, ROOT, typescript_file


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    live = sqlite_server(tmp_path_factory.mktemp("online-submit"))
    yield live
    live.stop()


def unpack(server, into: Path) -> Path:
    response = requests.get(f"{server.url}/api/v1/exercises/online-softmax/python.zip", timeout=30)
    zipfile.ZipFile(io.BytesIO(response.content)).extractall(into)
    return into / "online-softmax-python" / "exercises" / "online-softmax"


def learner_file(tmp_path: Path, slips: tuple[str, ...]) -> Path:
    """A learner's loop, numpy alone: the exercise's own loop (tests/slips.py) making `slips`."""
    path = tmp_path / f"mine_{'_'.join(slips) or 'right'}.py"
    path.write_text(
        (EXERCISE / "tests" / "slips.py").read_text()
        + (
            "\n\ndef online_attention(q, k, v, block_q, block_k, causal=True, record=None):\n"
            f"    return tiled(q, k, v, block_q, block_k, causal, {slips!r}, record=record)\n"
        )
    )
    return path


def new_challenge(server) -> tuple[requests.Session, str]:
    browser = requests.Session()
    browser.post(f"{server.url}/api/v1/session", timeout=30)
    body = browser.post(f"{server.url}/api/v1/exercises/online-softmax/challenges", json={}, timeout=30).json()
    return browser, f"{server.url}/api/v1/exercises/online-softmax/challenges/{body['id']}"


def implement(browser: requests.Session, server) -> dict:
    learner = browser.post(f"{server.url}/api/v1/session", timeout=30).json()["learner"]
    progress = browser.get(f"{server.url}/api/v1/learners/{learner}/progress?lesson=online-softmax", timeout=30)
    if progress.status_code == 404:
        return {"completed": False}
    return next(c for c in progress.json()["lessons"][0]["checkpoints"] if c["id"] == "implement")


def run(command: list, cwd: Path) -> subprocess.CompletedProcess:
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), "LANG": "C.UTF-8"}
    return subprocess.run([str(c) for c in command], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_the_download_completes_implement_from_a_python_with_numpy_alone(server, numpy_only, tmp_path):
    folder = unpack(server, tmp_path)
    browser, url = new_challenge(server)
    done = run([numpy_only, folder / "submit.py", learner_file(tmp_path, ()), "--challenge", url], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("✓ case") == 3 and "checkpoint is complete" in done.stdout
    assert implement(browser, server) | {"completed": True, "verification": "verified"} == implement(browser, server)


@pytest.mark.parametrize("slips", [(s,) for s in SLIPS], ids=str)
def test_the_download_refuses_each_slip_by_name(server, numpy_only, tmp_path, slips):
    folder = unpack(server, tmp_path)
    browser, url = new_challenge(server)
    done = run([numpy_only, folder / "submit.py", learner_file(tmp_path, slips), "--challenge", url], tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"[{slips[0]}]" in done.stdout and "✗ case 1" in done.stdout, done.stdout
    assert not implement(browser, server)["completed"]


def test_the_starter_is_refused_naming_its_three_slips(server, numpy_only, tmp_path):
    folder = unpack(server, tmp_path)
    _, url = new_challenge(server)
    done = run([numpy_only, folder / "submit.py", folder / "starter.py", "--challenge", url], tmp_path)
    assert done.returncode == 1
    brackets = [line[line.index("[") + 1 : line.index("]")] for line in done.stdout.splitlines() if "[" in line]
    named = {name for inside in brackets for name in inside.split(", ")}
    assert named == set(SLIPS), done.stdout


def test_printed_answers_are_what_the_paste_box_sends(server, numpy_only, tmp_path):
    folder = unpack(server, tmp_path)
    browser, url = new_challenge(server)
    done = run([numpy_only, folder / "submit.py", learner_file(tmp_path, ()), "--challenge", url, "--print"], tmp_path)
    printed = json.loads(done.stdout)
    assert printed["challenge"] == url.rsplit("/", 1)[1] and len(printed["answers"]) == 3
    verdict = browser.post(f"{url}/answers", json={"answers": printed["answers"]}, timeout=30).json()
    assert verdict["correct"] is True and verdict["completed"] is True


def test_a_file_that_is_not_a_loop_or_a_dead_link_is_said_plainly(server, numpy_only, tmp_path):
    folder = unpack(server, tmp_path)
    _, url = new_challenge(server)
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n")
    done = run([numpy_only, folder / "submit.py", empty, "--challenge", url], tmp_path)
    assert done.returncode == 2 and "has no function online_attention" in done.stderr and not done.stdout
    gone = run([numpy_only, folder / "submit.py", learner_file(tmp_path, ()), "--challenge", url + "0"], tmp_path)
    assert gone.returncode == 2 and "404" in gone.stderr and "Traceback" not in gone.stderr


@needs_typescript
def test_the_typescript_track_submits_the_same_verdicts(server, tmp_path):
    browser, url = new_challenge(server)
    command = ["pnpm", "-s", "exec", "tsx", "exercises/online-softmax/submit.ts"]
    starter = run([*command, EXERCISE / "starter.ts", "--challenge", url], ROOT)
    assert starter.returncode == 1 and all(f"{slip}" in starter.stdout for slip in SLIPS), starter.stdout
    fixed = run([*command, typescript_file(tmp_path, ()), "--challenge", url], ROOT)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert fixed.stdout.count("✓ case") == 3 and implement(browser, server)["completed"]
