"""`workbench`: serve, migrate, and the operator commands (keys, demo data, xAPI, exercise)."""

from __future__ import annotations

import sys

import click

from .config import ConfigError, Settings


def _settings() -> Settings:
    try:
        return Settings.load()
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None


@click.group(help=__doc__)
def main() -> None:
    pass


@main.command()
@click.option("--host", default=None, help="Interface to bind (default WORKBENCH_HOST or 127.0.0.1).")
@click.option("--port", default=None, type=int, help="Port (default WORKBENCH_PORT or 8000).")
@click.option("--workers", default=2, show_default=True, type=int, help="gunicorn worker processes.")
@click.option("--migrate/--no-migrate", default=True, show_default=True, help="Apply migrations first.")
def serve(host: str | None, port: int | None, workers: int, migrate: bool) -> None:
    """Serve the API and the front end with gunicorn."""
    from gunicorn.app.base import BaseApplication

    from .app import create_app

    settings = _settings()
    host = host or settings.host
    port = port or settings.port
    if migrate:
        _upgrade(settings)
    app = create_app()

    class _Server(BaseApplication):
        def load_config(self) -> None:
            self.cfg.set("bind", f"{host}:{port}")
            self.cfg.set("workers", workers)
            self.cfg.set("accesslog", None)
            self.cfg.set("limit_request_line", 8190)

        def load(self):
            return app

    click.echo(f"Multi-head attention workbench: http://{host}:{port}/  (Ctrl+C stops)", err=False)
    sys.stdout.flush()
    _Server().run()


@main.group()
def db() -> None:
    """Database schema (Alembic)."""


@db.command("upgrade")
@click.argument("revision", default="head")
def db_upgrade(revision: str) -> None:
    """Apply migrations up to REVISION (default: head)."""
    settings = _settings()
    _upgrade(settings, revision)
    click.echo(f"database at {revision}: {_redact(settings.database_url)}")


@db.command("current")
def db_current() -> None:
    """Print the applied revision."""
    from .db.migrate import current

    click.echo(current(_settings().database_url) or "(empty database)")


def _upgrade(settings: Settings, revision: str = "head") -> None:
    from .db.migrate import upgrade

    upgrade(settings.database_url, revision)


def _redact(url: str) -> str:
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        return f"{scheme}://***@{rest.split('@', 1)[1]}"
    return url


if __name__ == "__main__":
    main()
