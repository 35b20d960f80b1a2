"""The `workbench` console script."""

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from service.cli import main

from .exercise.slips import HANDWRITTEN_SLIPS


def test_db_upgrade_creates_the_sqlite_database_at_head(tmp_path, monkeypatch):
    path = tmp_path / "nested" / "wb.db"
    monkeypatch.setenv("WORKBENCH_DATABASE_URL", f"sqlite:///{path}")
    result = CliRunner().invoke(main, ["db", "upgrade"])
    assert result.exit_code == 0, result.output
    with sqlite3.connect(path) as conn:
        (revision,) = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    current = CliRunner().invoke(main, ["db", "current"])
    assert current.output.strip() == revision


def test_bad_settings_are_a_clean_cli_error(monkeypatch):
    monkeypatch.setenv("WORKBENCH_ENV", "production")
    result = CliRunner().invoke(main, ["db", "upgrade"])
    assert result.exit_code != 0
    assert "WORKBENCH_SECRET_KEY" in result.output


def _cli_env(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    monkeypatch.setenv("WORKBENCH_DATABASE_URL", url)
    assert CliRunner().invoke(main, ["db", "upgrade"]).exit_code == 0
    return url


def test_keys_create_prints_the_key_alone_on_the_last_line_and_it_works(tmp_path, monkeypatch):
    url = _cli_env(tmp_path, monkeypatch)
    result = CliRunner().invoke(
        main, ["keys", "create", "--platform", "acme", "--scopes", "events:write,progress:read,analytics:read"]
    )
    assert result.exit_code == 0, result.output
    token = result.output.strip().splitlines()[-1]
    assert token.startswith("wb_") and " " not in token

    from service.app import create_app

    client = create_app({"env": "testing", "database_url": url, "ratelimit_enabled": False}).test_client()
    from tests.api.helpers import event

    response = client.post("/api/v1/events", json=event(), headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 201


def test_keys_list_and_revoke(tmp_path, monkeypatch):
    _cli_env(tmp_path, monkeypatch)
    token = CliRunner().invoke(main, ["keys", "create", "--platform", "acme"]).output.strip().splitlines()[-1]
    prefix = token.split("_")[1]
    listing = CliRunner().invoke(main, ["keys", "list"]).output
    assert prefix in listing and "acme" in listing and token not in listing
    assert CliRunner().invoke(main, ["keys", "revoke", prefix]).exit_code == 0
    row = next(line for line in CliRunner().invoke(main, ["keys", "list"]).output.splitlines() if prefix in line)
    assert not row.rstrip().endswith(" -")  # a revocation time instead of "-"
    assert CliRunner().invoke(main, ["keys", "revoke", "nope"]).exit_code != 0


def test_keys_list_columns_line_up_whatever_their_widths(tmp_path, monkeypatch):
    _cli_env(tmp_path, monkeypatch)
    CliRunner().invoke(main, ["keys", "create", "--platform", "a-platform-with-a-rather-long-name-indeed"])
    CliRunner().invoke(main, ["keys", "create", "--platform", "x", "--scopes", "events:write"])
    lines = CliRunner().invoke(main, ["keys", "list"]).output.splitlines()
    header, rows = lines[0], lines[1:]
    assert len(rows) == 2
    for title in ("platform", "scopes", "created", "revoked"):
        column = header.index(title)
        for row in rows:  # every cell starts where its title does, after a blank
            assert row[column - 1] == " " and row[column] != " ", (title, row)


def test_xapi_forward_with_nothing_to_send_says_so_and_succeeds(tmp_path, monkeypatch):
    _cli_env(tmp_path, monkeypatch)
    alone = CliRunner().invoke(main, ["xapi", "forward"])
    assert alone.exit_code == 0 and "nothing to send" in alone.output
    CliRunner().invoke(main, ["keys", "create", "--platform", "acme"])
    configured = CliRunner().invoke(
        main,
        [
            "xapi",
            "configure",
            "--platform",
            "acme",
            "--endpoint",
            "http://127.0.0.1:9/xAPI/",
            "--username",
            "u",
            "--password",
            "p",
        ],
    )
    assert configured.exit_code == 0, configured.output
    passed = CliRunner().invoke(main, ["xapi", "forward"])  # no events: the LRS (nothing listens) is not called
    assert passed.exit_code == 0, passed.output
    assert passed.output.strip() == "acme: nothing to send"


def test_rollups_refresh_rolls_up_what_is_stored_once(tmp_path, monkeypatch):
    _cli_env(tmp_path, monkeypatch)
    assert CliRunner().invoke(main, ["demo-data", "--learners", "20"]).exit_code == 0
    with sqlite3.connect(tmp_path / "cli.db") as conn:
        (top,) = conn.execute("SELECT max(id) FROM events").fetchone()
    assert CliRunner().invoke(main, ["rollups", "refresh"]).output.strip() == f"rolled up {top} event ids"
    assert CliRunner().invoke(main, ["rollups", "refresh"]).output.strip() == "rolled up 0 event ids"
    with sqlite3.connect(tmp_path / "cli.db") as conn:
        (total,) = conn.execute(
            "SELECT sum(events) FROM event_rollups WHERE grain = 'day' AND lesson = '' AND dimension = 'event'"
        ).fetchone()
        assert total == conn.execute("SELECT count(*) FROM events").fetchone()[0]


def test_keys_create_rejects_unknown_scopes(tmp_path, monkeypatch):
    _cli_env(tmp_path, monkeypatch)
    result = CliRunner().invoke(main, ["keys", "create", "--platform", "acme", "--scopes", "events:write,root"])
    assert result.exit_code != 0 and "scopes must be" in result.output


def test_exercise_check_names_the_starters_three_bugs_and_fails():
    result = CliRunner().invoke(main, ["exercise", "check", "exercises/multi-head-attention/starter.py"])
    assert result.exit_code == 1
    first = result.output.splitlines()[0]
    assert "interleaved_split" in first and "no_scaling" in first and "mask_after_softmax" in first
    assert result.output.strip().endswith("0 of 5 cases correct")


def test_exercise_check_passes_a_correct_implementation():
    result = CliRunner().invoke(main, ["exercise", "check", "tests/exercise/implementations/reference_adapter.py"])
    assert result.exit_code == 0, result.output
    assert "5 of 5 cases correct" in result.output


HANDWRITTEN = "tests/exercise/implementations/handwritten.py"
SLIPS = HANDWRITTEN_SLIPS


@pytest.mark.parametrize("mistake", SLIPS)
def test_exercise_check_recognises_each_handwritten_slip(monkeypatch, mistake):
    monkeypatch.setenv("MHA_MISTAKE", mistake)
    result = CliRunner().invoke(main, ["exercise", "check", HANDWRITTEN])
    assert result.exit_code == 1, result.output
    assert f"[{mistake}]" in result.output, result.output
    assert "not a known mistake" not in result.output
    assert "Warning" not in result.output


def test_exercise_check_says_what_a_raising_implementation_raised(monkeypatch):
    monkeypatch.setenv("MHA_MISTAKE", "diagonal_masked")
    monkeypatch.setenv("MHA_FLOAT_ERRORS", "raise")
    result = CliRunner().invoke(main, ["exercise", "check", HANDWRITTEN])
    assert result.exit_code == 1
    assert "raised FloatingPointError" in result.output


@pytest.fixture(scope="module")
def live_server(tmp_path_factory):
    from .live import sqlite_server

    server = sqlite_server(tmp_path_factory.mktemp("submit"))
    yield server
    server.stop()


def new_challenge(server, learner="ada"):
    import requests

    session = requests.Session()
    session.post(f"{server.url}/api/v1/session")
    body = session.post(f"{server.url}/api/v1/exercises/multi-head-attention/challenges", json={}).json()
    return session, f"{server.url}/api/v1/exercises/multi-head-attention/challenges/{body['id']}"


def workbench(*args: str, mistake: str = "") -> subprocess.CompletedProcess:
    """The installed `workbench` command, as a learner in the repository runs it."""
    command = Path(sys.executable).with_name("workbench")
    env = {**os.environ, "MHA_MISTAKE": mistake}
    done = subprocess.run([str(command), *args], capture_output=True, text=True, env=env, timeout=120)
    done.output = done.stdout + done.stderr
    done.exit_code = done.returncode
    return done


@pytest.mark.parametrize("mistake", SLIPS)
def test_exercise_submit_rejects_each_slip_naming_it(live_server, mistake):
    _, url = new_challenge(live_server)
    result = workbench("exercise", "submit", HANDWRITTEN, "--challenge", url, mistake=mistake)
    assert result.exit_code == 1, result.output
    assert f"[{mistake}" in result.output or f", {mistake}" in result.output, result.output


def test_exercise_submit_completes_implement_for_a_correct_file(live_server):
    session, url = new_challenge(live_server)
    result = workbench("exercise", "submit", HANDWRITTEN, "--challenge", url)
    assert result.exit_code == 0, result.output
    assert "implement checkpoint is complete" in result.output
    learner = session.post(f"{live_server.url}/api/v1/session").json()["learner"]
    progress = session.get(f"{live_server.url}/api/v1/learners/{learner}/progress?lesson=multi-head-attention").json()
    implement = next(c for c in progress["lessons"][0]["checkpoints"] if c["id"] == "implement")
    assert implement["completed"] and implement["verification"] == "verified"
    again = workbench("exercise", "submit", HANDWRITTEN, "--challenge", url)
    assert again.exit_code == 2 and "already solved" in again.output


def test_exercise_submit_says_what_is_wrong_with_a_bad_challenge(live_server):
    result = workbench(
        "exercise", "submit", HANDWRITTEN, "--challenge", f"{live_server.url}/api/v1/exercises/x/challenges/0"
    )
    assert result.exit_code == 2 and "answered 404" in result.output


def test_db_maintain_applies_the_retention_setting(tmp_path, monkeypatch):
    _cli_env(tmp_path, monkeypatch)
    assert CliRunner().invoke(main, ["demo-data", "--learners", "5"]).exit_code == 0
    with sqlite3.connect(tmp_path / "cli.db") as conn:  # one event as if stored three years ago
        conn.execute("UPDATE events SET stored_at = '2023-01-05 10:00:00.000000' WHERE id = 1")
    monkeypatch.setenv("WORKBENCH_EVENTS_RETENTION_MONTHS", "12")
    held = CliRunner().invoke(main, ["db", "maintain"])
    assert held.exit_code == 0 and held.output == ""  # not rolled up yet: kept
    CliRunner().invoke(main, ["rollups", "refresh"])
    result = CliRunner().invoke(main, ["db", "maintain"])
    assert result.output.strip() == "deleted 1 events stored over 12 months ago"
    with sqlite3.connect(tmp_path / "cli.db") as conn:
        assert conn.execute("SELECT count(*) FROM events WHERE id = 1").fetchone() == (0,)
    monkeypatch.setenv("WORKBENCH_EVENTS_RETENTION_MONTHS", "-1")
    refused = CliRunner().invoke(main, ["db", "maintain"])
    assert refused.exit_code != 0 and "WORKBENCH_EVENTS_RETENTION_MONTHS cannot be negative" in refused.output


def test_the_demo_cohort_completes_implement_mostly_by_verified_challenges(tmp_path, monkeypatch):
    """As real learners of this product would: the lesson's path is the server's challenge."""
    _cli_env(tmp_path, monkeypatch)
    assert CliRunner().invoke(main, ["demo-data", "--learners", "400"]).exit_code == 0
    with sqlite3.connect(tmp_path / "cli.db") as conn:
        how = dict(
            conn.execute(
                "SELECT verification, count(*) FROM checkpoint_progress WHERE checkpoint = 'implement' "
                "GROUP BY verification"
            ).fetchall()
        )
    assert how["verified"] > 3 * how["reported"] > 0, how  # both kinds, most verified


def test_lessons_check_passes_here_and_names_a_translation_left_behind(tmp_path, monkeypatch):
    import shutil

    from service.lessons.translations import source_digest

    assert CliRunner().invoke(main, ["lessons", "check"]).exit_code == 0
    content = tmp_path / "lessons"
    shutil.copytree(Path(__file__).resolve().parents[1] / "content" / "lessons", content)
    english = content / "multi-head-attention.md"
    made_from = source_digest(english)[:12]
    english.write_text(english.read_text().replace("attention runs several", "attention runs many"))
    monkeypatch.setenv("WORKBENCH_CONTENT_DIR", str(content))
    result = CliRunner().invoke(main, ["lessons", "check"])
    assert result.exit_code == 1
    assert f"es/multi-head-attention.md: made from {made_from}" in result.output
    assert "zh-CN/multi-head-attention.md" in result.output and "2 problems" in result.output
