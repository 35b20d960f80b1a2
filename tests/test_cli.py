"""The `workbench` console script."""

import sqlite3

from click.testing import CliRunner

from service.cli import main


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
