"""The deployment files: compose validates, the image is slim and non-root, gunicorn's limits."""

import importlib.util
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import requests

ROOT = Path(__file__).resolve().parents[1]


def compose_command():
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return None


def test_docker_compose_config_validates(tmp_path):
    command = compose_command()
    if command is None:
        pytest.skip("neither 'docker compose' nor 'docker-compose' is installed (.ci/run installs docker-compose)")
    shutil.copy(ROOT / "docker-compose.yml", tmp_path)
    env = (
        (ROOT / ".env.example")
        .read_text()
        .replace("WORKBENCH_SECRET_KEY=\n", "WORKBENCH_SECRET_KEY=" + "s" * 40 + "\n")
    )
    (tmp_path / ".env").write_text(env)
    result = subprocess.run([*command, "config"], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    for service in ("api:", "postgres:", "redis:", "forwarder:"):
        assert service in result.stdout


def test_env_example_lists_every_setting():
    from dataclasses import fields

    from service.config import Settings

    text = (ROOT / ".env.example").read_text()
    missing = [f.name for f in fields(Settings) if f.name != "extra" and f"WORKBENCH_{f.name.upper()}" not in text]
    assert missing == []


def test_the_image_is_slim_non_root_and_migrates_first():
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "FROM python:3.11-slim" in dockerfile
    assert "USER workbench" in dockerfile
    assert "workbench db upgrade && exec gunicorn -c gunicorn.conf.py" in dockerfile


def test_the_image_builds_where_docker_runs():
    if not shutil.which("docker") or subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        pytest.skip("no docker daemon on this machine: build with 'docker build -t attention-workbench .'")
    result = subprocess.run(
        ["docker", "build", "-q", "-t", "attention-workbench:test", str(ROOT)],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert result.returncode == 0, result.stderr[-2000:]


def test_gunicorn_settings_come_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))  # restored after: the file sets it otherwise
    monkeypatch.setenv("WORKBENCH_WORKERS", "5")
    monkeypatch.setenv("WORKBENCH_THREADS", "4")
    spec = importlib.util.spec_from_file_location("gunicorn_conf", ROOT / "gunicorn.conf.py")
    conf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conf)
    assert (conf.workers, conf.threads, conf.worker_class) == (5, 4, "service.server.worker.BufferingWorker")
    assert conf.limit_request_line == 8190 and conf.timeout == 30 and conf.accesslog is None


def test_start_up_says_when_rate_limits_are_counted_per_worker(monkeypatch, tmp_path):
    """Under memory:// with two workers each allows the whole limit (320 anonymous requests got no
    429 against 300/min): gunicorn says so when it starts (issue 31)."""
    import types

    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path / "metrics"))
    spec = importlib.util.spec_from_file_location("gunicorn_conf", ROOT / "gunicorn.conf.py")
    conf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conf)
    said: list[str] = []
    log = types.SimpleNamespace(warning=said.append)

    def start(workers, **env):
        said.clear()
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        conf.on_starting(
            types.SimpleNamespace(cfg=types.SimpleNamespace(bind=["127.0.0.1:8000"], workers=workers), log=log)
        )
        return said

    assert "counted in each of the 2 workers' memory" in start(2)[0]
    assert start(1) == []  # one worker: the memory store is the whole count
    assert start(2, WORKBENCH_RATELIMIT_STORAGE_URI="redis://127.0.0.1:6379/0") == []


def test_instances_on_one_machine_share_no_control_socket(tmp_path):
    """gunicorn 27 opens a control socket at one path in the user's home for every instance; the
    shipped config opens none unless WORKBENCH_CONTROL_SOCKET names this instance's own."""
    from tests.live import sqlite_server

    home = tmp_path / "home"
    home.mkdir()
    first = sqlite_server(tmp_path, extra_args=["-c", "gunicorn.conf.py"], HOME=str(home))
    second = sqlite_server(tmp_path, extra_args=["-c", "gunicorn.conf.py"], HOME=str(home))
    try:
        assert (
            requests.get(first.url + "/healthz", timeout=5).ok and requests.get(second.url + "/healthz", timeout=5).ok
        )
        assert list(home.rglob("*")) == []  # no ~/.gunicorn/gunicorn.ctl
    finally:
        first.stop()
        second.stop()
    own = tmp_path / "instance.ctl"
    third = sqlite_server(
        tmp_path, extra_args=["-c", "gunicorn.conf.py"], HOME=str(home), WORKBENCH_CONTROL_SOCKET=str(own)
    )
    try:
        deadline = time.monotonic() + 10
        while not own.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert own.is_socket() and list(home.rglob("*")) == []
    finally:
        third.stop()
