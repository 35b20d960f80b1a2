"""`workbench lti register|list|remove`: what a platform administrator types."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from service.cli import main

from .platform import Platform

URLS = [
    "--issuer",
    "https://lms.example.edu",
    "--client-id",
    "tool-client-1",
    "--deployment-id",
    "d1",
    "--deployment-id",
    "d2",
    "--auth-login-url",
    "https://lms.example.edu/auth",
    "--auth-token-url",
    "https://lms.example.edu/token",
    "--platform",
    "lms",
]


@pytest.fixture
def cli(app, monkeypatch):
    monkeypatch.setenv("WORKBENCH_DATABASE_URL", app.extensions["settings"].database_url)
    return lambda *args: CliRunner().invoke(main, ["lti", *args])


def test_register_list_and_remove(cli, tmp_path):
    keyset = tmp_path / "jwks.json"
    keyset.write_text(json.dumps(Platform().jwks()))
    registered = cli("register", *URLS, "--keyset-file", str(keyset))
    assert registered.exit_code == 0, registered.output
    assert registered.output.startswith("registered 1: https://lms.example.edu client tool-client-1 -> platform lms")
    again = cli("register", *URLS[:-2], "--platform", "lms", "--keyset-url", "https://lms.example.edu/jwks")
    assert again.output.startswith("registered 1:")  # the same issuer and client id: updated
    assert cli("list").output.split("\t") == [
        "1",
        "lms",
        "https://lms.example.edu",
        "tool-client-1",
        "d1,d2",
        "https://lms.example.edu/jwks",
        "command\n",  # typed by an operator, not registered by the platform itself
    ]
    assert cli("remove", "1").output.strip() == "removed registration 1"
    assert cli("list").output == ""
    missing = cli("remove", "1")
    assert missing.exit_code != 0 and "no registration 1" in missing.output


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        ([], "one of them"),
        (["--keyset-url", "https://a/jwks", "--keyset-file", "{file}"], "one of them"),
        (["--keyset-file", "{bad}"], "is not JSON"),
        (["--keyset-file", "{notjwks}"], "must be a JWKS"),
        (["--keyset-url", "ftp://a/jwks"], "http(s) URLs"),
    ],
)
def test_a_registration_that_cannot_work_is_refused_with_the_reason(cli, tmp_path, extra, reason):
    files = {"file": tmp_path / "ok.json", "bad": tmp_path / "bad.json", "notjwks": tmp_path / "n.json"}
    files["file"].write_text(json.dumps(Platform().jwks()))
    files["bad"].write_text("{nope")
    files["notjwks"].write_text('{"kty": "RSA"}')
    args = [a.format(**{k: str(v) for k, v in files.items()}) for a in extra]
    result = cli("register", *URLS, *args)
    assert result.exit_code != 0 and reason in result.output
    assert cli("list").output == ""
