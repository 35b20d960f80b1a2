"""The exercise wherever the learner is: the lesson's downloads, submit and trace in each language,
against a real server, from a Python that has numpy and nothing else.

The expected verdicts come from the server itself: its challenge checker says which mistake a
file makes, and its own comparison (POST /attention/compare) says where each failure mode first
parts from the correct computation.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import urllib.parse
import zipfile
from pathlib import Path

import pytest
import requests

from service.api.exercises import BUNDLES

from ..live import sqlite_server
from .slips import HANDWRITTEN_SLIPS
from .test_exercise import (
    IMPLEMENTATIONS,
    LANGUAGES,
    ROOT,
    SEED_COMMAND,
    STARTER_BUGS,
    SUFFIX,
    handwritten,
    mistakes_named,
    needs_typescript,
)

EXERCISE = "exercises/multi-head-attention"
WORKBENCH = "/explorables/multi-head-attention#t=1,0.5,-0.5,1;0.2,1,1.5,-0.3;-1,0.3,0.8,0.6&causal=1&reuse=0&wo=learned"
LEARNER_STAGES = ["weights", "head-output", "concat", "output"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    live = sqlite_server(tmp_path_factory.mktemp("scripts"))
    yield live
    live.stop()


def unpack(server, language: str, into: Path) -> Path:
    response = requests.get(f"{server.url}/api/v1/exercises/multi-head-attention/{language}.zip", timeout=30)
    assert response.status_code == 200 and response.headers["Content-Type"] == "application/zip"
    zipfile.ZipFile(io.BytesIO(response.content)).extractall(into)
    return into / f"multi-head-attention-{language}"


def new_challenge(server) -> tuple[requests.Session, str]:
    browser = requests.Session()
    browser.post(f"{server.url}/api/v1/session", timeout=30)
    body = browser.post(f"{server.url}/api/v1/exercises/multi-head-attention/challenges", json={}, timeout=30).json()
    return browser, f"{server.url}/api/v1/exercises/multi-head-attention/challenges/{body['id']}"


def implement(browser: requests.Session, server) -> dict:
    learner = browser.post(f"{server.url}/api/v1/session", timeout=30).json()["learner"]
    progress = browser.get(f"{server.url}/api/v1/learners/{learner}/progress?lesson=multi-head-attention", timeout=30)
    return next(c for c in progress.json()["lessons"][0]["checkpoints"] if c["id"] == "implement")


def run(command: list[str], cwd: Path, mistake: str | None = None, **env: str) -> subprocess.CompletedProcess:
    environment = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), **env}
    if mistake is not None:
        environment["MHA_MISTAKE"] = mistake
    return subprocess.run(command, cwd=cwd, env=environment, capture_output=True, text=True, timeout=120)


def submit_command(language: str, python: Path | str, folder: Path, implementation: Path, url: str) -> list[str]:
    if language == "python":
        return [str(python), f"{folder}/{EXERCISE}/submit.py", str(implementation), "--challenge", url]
    return ["pnpm", "-s", "run", "submit", "--", str(implementation), "--challenge", url]


def trace_command(language: str, implementation: Path, link: str, *flags: str) -> list[str]:
    if language == "python":
        return [sys.executable, f"{ROOT}/{EXERCISE}/trace.py", str(implementation), link, *flags]
    return ["pnpm", "-s", "run", "trace", "--", str(implementation), link, *flags]


# The downloads


@pytest.mark.parametrize("language", ["python", "typescript"])
def test_each_download_holds_the_repositorys_files_under_one_folder(server, tmp_path, language):
    folder = unpack(server, language, tmp_path)
    unpacked = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    assert unpacked == sorted(BUNDLES["multi-head-attention"][language])
    for name in BUNDLES["multi-head-attention"][language]:
        assert (folder / name).read_bytes() == (ROOT / name).read_bytes(), name
    tracked = subprocess.run(
        ["git", "ls-files", *BUNDLES["multi-head-attention"][language]], cwd=ROOT, capture_output=True, text=True
    )
    assert sorted(tracked.stdout.split()) == sorted(
        BUNDLES["multi-head-attention"][language]
    )  # nothing in a download is untracked


def test_a_download_is_cached_by_its_etag(server):
    url = f"{server.url}/api/v1/exercises/multi-head-attention/python.zip"
    first = requests.get(url, timeout=30)
    again = requests.get(url, headers={"If-None-Match": first.headers["ETag"]}, timeout=30)
    assert again.status_code == 304 and first.headers["Content-Disposition"].startswith("attachment")


def test_the_python_download_completes_implement_from_a_python_with_numpy_alone(server, numpy_only, tmp_path):
    folder = unpack(server, "python", tmp_path)
    browser, url = new_challenge(server)
    done = run(submit_command("python", numpy_only, folder, handwritten("python"), url), cwd=tmp_path, mistake="")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "The implement checkpoint is complete" in done.stdout
    assert implement(browser, server) | {"completed": True, "verification": "verified"} == implement(browser, server)


@pytest.mark.parametrize("mistake", HANDWRITTEN_SLIPS)
def test_the_python_download_refuses_each_mistake_by_name(server, numpy_only, tmp_path, mistake):
    folder = unpack(server, "python", tmp_path)
    browser, url = new_challenge(server)
    done = run(submit_command("python", numpy_only, folder, handwritten("python"), url), cwd=tmp_path, mistake=mistake)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"[{mistake}" in done.stdout or f", {mistake}" in done.stdout, done.stdout
    assert not implement(browser, server)["completed"]


@needs_typescript
def test_the_typescript_download_installs_offline_and_runs_the_seeds_command(server, tmp_path):
    folder = unpack(server, "typescript", tmp_path)
    installed = run(["pnpm", "install", "--offline", "--frozen-lockfile"], cwd=folder)
    if installed.returncode:
        pytest.skip(f"pnpm could not install from its store offline: {installed.stderr[-300:]}")
    starter = run(SEED_COMMAND, cwd=folder)
    assert starter.returncode == 1 and mistakes_named([starter.stdout + starter.stderr]) == STARTER_BUGS, starter.stdout


@needs_typescript
def test_pnpm_run_submit_completes_implement(server):
    browser, url = new_challenge(server)
    done = run(submit_command("typescript", "", ROOT, handwritten("typescript"), url), cwd=ROOT, mistake="")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "The implement checkpoint is complete" in done.stdout
    assert implement(browser, server)["verification"] == "verified"


@needs_typescript
@pytest.mark.parametrize("mistake", HANDWRITTEN_SLIPS)
def test_pnpm_run_submit_refuses_each_mistake_by_name(server, mistake):
    browser, url = new_challenge(server)
    done = run(submit_command("typescript", "", ROOT, handwritten("typescript"), url), cwd=ROOT, mistake=mistake)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"[{mistake}" in done.stdout or f", {mistake}" in done.stdout, done.stdout
    assert not implement(browser, server)["completed"]


@pytest.mark.parametrize("broken", ["missing_head_axis", "raises", "strings", "returns_list"])
@pytest.mark.parametrize("language", LANGUAGES)
def test_submit_names_an_unusable_result_before_sending_anything(server, tmp_path, language, broken):
    browser, url = new_challenge(server)
    implementation = IMPLEMENTATIONS / f"broken{SUFFIX[language]}"
    done = run(submit_command(language, sys.executable, ROOT, implementation, url), cwd=ROOT, MHA_BROKEN=broken)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "✗ case 1 (" in done.stderr and "Traceback" not in done.stderr and "    at " not in done.stderr
    assert requests.get(url, timeout=30).json()["attempts"] == 0


@pytest.mark.parametrize("language", LANGUAGES)
def test_submit_says_what_is_wrong_with_the_file_or_the_link(server, tmp_path, language):
    _, url = new_challenge(server)
    missing = run(
        submit_command(language, sys.executable, ROOT, tmp_path / f"nothing{SUFFIX[language]}", url), cwd=ROOT
    )
    assert missing.returncode == 2 and "does not exist" in missing.stderr
    nofunction = IMPLEMENTATIONS / f"no_function{SUFFIX[language]}"
    wrong = run(submit_command(language, sys.executable, ROOT, nofunction, url), cwd=ROOT)
    assert wrong.returncode == 2 and "defines no" in wrong.stderr
    gone = run(submit_command(language, sys.executable, ROOT, handwritten(language), url[:-4] + "0000"), cwd=ROOT)
    assert gone.returncode == 2 and "answered 404" in gone.stderr
    assert not any("Traceback" in d.stderr for d in (missing, wrong, gone))


# Trace: your own code beside the engine's


def first_divergence_per_the_server(server, mistake: str) -> str:
    """Where the engine's own computation of `mistake` first parts from the correct one, among the
    stages a learner's function returns. The masking slips the engine does not compute (the
    registry marks them checker-only) change the weights first: nothing before them differs."""
    registry = requests.get(f"{server.url}/api/v1/failure-modes", timeout=30).json()["failure_modes"]
    mode = next(m for m in registry if m["id"] == mistake)
    if not mode["engine"]:
        assert mode["step"] == "mask"
        return "weights"
    preset = requests.get(f"{server.url}/api/v1/presets/workbench-learned", timeout=30).json()["request"]
    params = dict(urllib.parse.parse_qsl(WORKBENCH.split("#")[1]))
    tokens = [[float(v) for v in row.split(",")] for row in params["t"].split(";")]
    body = {"tokens": tokens, "heads": 2, "causal": True, "projections": {"output": preset["projections"]["output"]}}
    response = requests.post(
        f"{server.url}/api/v1/attention/compare", json={**body, "failure_mode": mistake}, timeout=30
    )
    assert response.status_code == 200, response.text
    return next(s for s in response.json()["divergence"]["stages"] if s in LEARNER_STAGES)


@pytest.mark.parametrize("language", LANGUAGES)
def test_trace_says_identical_for_a_correct_file(server, language):
    done = run(trace_command(language, handwritten(language), server.url + WORKBENCH, "--json"), cwd=ROOT, mistake="")
    result = json.loads(done.stdout)
    assert done.returncode == 0 and result["first_divergence"] == "identical" and result["mistake"] is None
    assert result["max_error"] < 1e-12 and set(result["stages"].values()) == {"identical"}


@pytest.mark.parametrize("mistake", HANDWRITTEN_SLIPS)
@pytest.mark.parametrize("language", LANGUAGES)
def test_trace_names_the_first_divergent_stage_and_the_mistake(server, language, mistake):
    done = run(
        trace_command(language, handwritten(language), server.url + WORKBENCH, "--json"), cwd=ROOT, mistake=mistake
    )
    result = json.loads(done.stdout)
    assert done.returncode == 1, done.stderr
    assert result["first_divergence"] == first_divergence_per_the_server(server, mistake)
    assert result["mistake"] == mistake and result["max_error"] > 1e-6


def test_trace_links_to_the_workbench_with_your_numbers_beside_the_engines(server):
    done = run(trace_command("python", handwritten("python"), server.url + WORKBENCH), cwd=ROOT, mistake="no_scaling")
    link = done.stdout.strip().splitlines()[-1].strip()
    assert link.startswith(server.url + "/explorables/multi-head-attention#")
    params = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(link).fragment))
    assert params["wo"] == "learned" and "reuse" not in params  # compared with the correct computation
    assert params["lesson"] == "multi-head-attention"  # the workbench it opens has a way back
    yours = json.loads(params["yours"])
    assert sorted(yours) == sorted(LEARNER_STAGES) and len(yours["weights"]) == 2
    assert "The first difference is the weights" in done.stdout and "no_scaling" in done.stdout


@pytest.mark.parametrize("language", LANGUAGES)
def test_trace_names_each_setting_its_link_cannot_carry(server, language):
    """A link read with the broken reuse on and a failure mode compared: the new link leaves both
    out (yours is compared with the correct computation) and says so, in the report and the JSON."""
    link = server.url + WORKBENCH.replace("reuse=0", "reuse=1") + "&compare=no_scaling"
    done = run(trace_command(language, handwritten(language), link, "--json"), cwd=ROOT, mistake="no_scaling")
    result = json.loads(done.stdout)
    params = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(result["link"]).fragment))
    assert "reuse" not in params and "compare" not in params and params["causal"] == "1"
    assert [said.split(":")[0] for said in result["left_out"]] == ["reuse=1", "compare=no_scaling"]
    words = run(trace_command(language, handwritten(language), link), cwd=ROOT, mistake="no_scaling")
    assert "leaves out reuse=1: the broken reuse" in words.stdout


@pytest.mark.parametrize("language", LANGUAGES)
def test_trace_refuses_a_link_the_exercise_cannot_compute(server, language):
    link = server.url + WORKBENCH + "&rope=half"
    done = run(trace_command(language, handwritten(language), link), cwd=ROOT, mistake="")
    assert done.returncode == 2 and "RoPE" in done.stderr and "switch those off" in done.stderr
    nothing = run(
        trace_command(language, handwritten(language), server.url + "/explorables/multi-head-attention"),
        cwd=ROOT,
        mistake="",
    )
    assert nothing.returncode == 2 and "not a workbench link" in nothing.stderr


def test_the_trace_script_needs_numpy_alone(server, numpy_only, tmp_path):
    folder = unpack(server, "python", tmp_path)
    command = [str(numpy_only), f"{folder}/{EXERCISE}/trace.py", str(handwritten("python")), server.url + WORKBENCH]
    done = run([*command, "--json"], cwd=tmp_path, mistake="interleaved_split")
    assert json.loads(done.stdout)["mistake"] == "interleaved_split", done.stderr


def test_the_workbench_cli_runs_the_same_scripts(server):
    workbench = shutil.which("workbench", path=str(Path(sys.executable).parent))
    done = run(
        [workbench, "exercise", "trace", str(handwritten("python")), server.url + WORKBENCH, "--json"],
        cwd=ROOT,
        mistake="",
    )
    assert json.loads(done.stdout)["first_divergence"] == "identical"


@pytest.mark.parametrize("language", ["python", pytest.param("typescript", marks=needs_typescript)])
def test_submit_speaks_the_learners_language_from_the_first_line_to_the_last(server, numpy_only, tmp_path, language):
    """Every line submit prints is in the learner's language (MHA_LANG): the server's verdicts,
    and its own words (each case, the checkpoint's completion), none left in English."""
    browser, url = new_challenge(server)
    python = numpy_only if language == "python" else ""
    folder = unpack(server, "python", tmp_path) if language == "python" else ROOT
    where = tmp_path if language == "python" else ROOT
    done = run(
        submit_command(language, python, folder, handwritten(language), url), cwd=where, mistake="", MHA_LANG="es"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "El punto de control «implement» está completo" in done.stdout
    assert "caso 1:" in done.stdout and "case 1:" not in done.stdout and "The implement checkpoint" not in done.stdout
