"""What every `workbench` command starts from: the settings, the database."""

from __future__ import annotations

import click

from ..config import ConfigError, Settings


def _settings() -> Settings:
    try:
        return Settings.load()
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None


def _database():
    from ..db import Database

    settings = _settings()
    return Database(settings.database_url, settings.sqlite_busy_timeout_ms)
