"""Safe defaults: loopback unless told otherwise, no public bind with the development secret,
Retry-After only where it means something, no redirect built from the Host header."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from service.cli import main
from service.config import ConfigError, Settings
from service.deployment import is_loopback, refuse_public_bind_without_secret

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "bind, loopback",
    [
        ("127.0.0.1:8000", True),
        ("[::1]:8000", True),
        ("localhost:8000", True),
        ("unix:/run/wb.sock", True),
        ("0.0.0.0:8000", False),
        ("[::]:8000", False),
        ("10.0.0.5:8000", False),
        ("example.org:80", False),
    ],
)
def test_which_binds_are_this_machine_only(bind, loopback):
    assert is_loopback(bind) is loopback


def test_a_public_bind_needs_a_real_secret():
    with pytest.raises(ConfigError, match="WORKBENCH_SECRET_KEY"):
        refuse_public_bind_without_secret(["0.0.0.0:8000"], Settings.load({}, environ={}))
    refuse_public_bind_without_secret(["127.0.0.1:8000"], Settings.load({}, environ={}))
    refuse_public_bind_without_secret(["0.0.0.0:8000"], Settings.load({"secret_key": "s" * 40}, environ={}))


def test_workbench_serve_refuses_a_public_address_with_the_development_secret(monkeypatch):
    monkeypatch.delenv("WORKBENCH_SECRET_KEY", raising=False)
    result = CliRunner().invoke(main, ["serve", "--host", "0.0.0.0", "--no-migrate"])
    assert result.exit_code != 0 and "WORKBENCH_SECRET_KEY" in result.output


def test_gunicorn_and_make_run_bind_loopback_by_default_and_the_image_opts_in():
    conf = (ROOT / "gunicorn.conf.py").read_text()
    assert re.search(r'"WORKBENCH_BIND", "127\.0\.0\.1:8000"', conf)
    assert re.search(r"HOST\s+\?= 127\.0\.0\.1", (ROOT / "Makefile").read_text())
    assert "WORKBENCH_BIND=0.0.0.0:8000" in (ROOT / "Dockerfile").read_text()


def test_metrics_directories_are_per_instance(monkeypatch):
    """Named after the master's pid (gunicorn.conf.py names it before forking), so two instances on
    one machine neither mix their counters nor wipe each other's."""
    from service.server.hooks import metrics_directory

    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", "")  # recorded, so the name set below is undone after
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR")
    assert metrics_directory().endswith(f"workbench-metrics-{os.getpid()}")
    assert "metrics_directory()" in (ROOT / "gunicorn.conf.py").read_text()


def test_retry_after_only_on_429_and_503(client):
    assert "Retry-After" not in client.get("/api/v1/lessons").headers
    assert "Retry-After" not in client.post("/api/v1/session").headers


def test_a_double_slash_is_not_redirected_to_the_host_header(client):
    response = client.get("//api/v1/lessons", headers={"Host": "evil.example"})
    assert response.status_code == 404 and "Location" not in response.headers
