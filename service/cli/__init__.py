"""`workbench`: serve, migrate, and the operator commands (keys, demo data, xAPI, exercise)."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

import click

from ..config import ConfigError, Settings
from .common import _database, _settings


@click.group(help=__doc__)
def main() -> None:
    pass


@main.command()
@click.option("--host", default=None, help="Interface to bind (default WORKBENCH_HOST or 127.0.0.1).")
@click.option("--port", default=None, type=int, help="Port (default WORKBENCH_PORT or 8000).")
@click.option("--workers", default=None, type=int, help="gunicorn worker processes (default WORKBENCH_WORKERS or 2).")
@click.option("--migrate/--no-migrate", default=True, show_default=True, help="Apply migrations first.")
def serve(host: str | None, port: int | None, workers: int | None, migrate: bool) -> None:
    """Serve the API and the front end with gunicorn, configured as in production (gunicorn.conf.py)."""
    from ..config import ROOT
    from ..deployment import refuse_public_bind_without_secret

    settings = _settings()
    host = host or settings.host
    port = port or settings.port
    try:
        refuse_public_bind_without_secret([f"{host}:{port}"], settings)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    if migrate:
        _upgrade(settings)
    # The production command itself (gunicorn.conf.py: the same worker, hooks and error pages), so
    # what `make run` serves is what a deployment serves.
    if workers is not None:
        os.environ["WORKBENCH_WORKERS"] = str(workers)
    os.environ.setdefault("WORKBENCH_PUBLIC_URL", f"http://{host}:{port}")  # absolute URLs name this server
    click.echo(f"Multi-head attention workbench: http://{host}:{port}/  (Ctrl+C stops)", err=False)
    sys.stdout.flush()
    config = str(ROOT / "gunicorn.conf.py")
    command = [sys.executable, "-m", "gunicorn", "-c", config, "--bind", f"{host}:{port}", "service.app:create_app()"]
    os.chdir(ROOT)
    os.execv(sys.executable, command)


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
    from ..db.migrate import current

    click.echo(current(_settings().database_url) or "(empty database)")


@db.command("maintain")
def db_maintain() -> None:
    """Make the event log's coming months (PostgreSQL), apply WORKBENCH_EVENTS_RETENTION_MONTHS and
    delete the storage quotas' ended windows."""
    _maintain(_database(), _settings().events_retention_months)


def _maintain(database, keep_months: int) -> None:
    from ..db.partitions import maintain

    done = maintain(database, keep_months)
    for name in done.created:
        click.echo(f"made {name}")
    if done.moved:
        click.echo(f"moved {done.moved} events out of events_default into their months")
    for name in done.dropped:
        click.echo(f"dropped {name} (retention: {keep_months} months)")
    if done.deleted:
        click.echo(f"deleted {done.deleted} events stored over {keep_months} months ago")
    for name in done.held:
        click.echo(f"kept {name} past retention: the rollups have not counted all of it yet")
    if done.usage_windows:
        click.echo(f"deleted {done.usage_windows} ended storage quota windows")


@main.group()
def keys() -> None:
    """Platform API keys (stored hashed; a key is shown once, when made)."""


@keys.command("create")
@click.option("--platform", "platform_name", required=True, help="Platform name (created if new).")
@click.option(
    "--scopes",
    default="events:write,progress:read",
    show_default=True,
    help="Comma-separated: events:write, progress:read, analytics:read, admin.",
)
@click.option("--label", default="", help="A note to recognise the key by.")
def keys_create(platform_name: str, scopes: str, label: str) -> None:
    """Make a key for a platform; the key alone is printed on the last line."""
    from ..db.platforms import create_key
    from ..identity import parse_scopes

    try:
        scope_set = parse_scopes(scopes)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--scopes") from None
    if not platform_name.replace("-", "").replace("_", "").isalnum() or len(platform_name) > 64:
        raise click.BadParameter("use letters, digits, - and _ (at most 64)", param_hint="--platform")
    with _database().write() as session:
        key, platform = create_key(session, platform_name, scope_set, label)
    click.echo(f"platform {platform.name}: key {key.prefix} with scopes {','.join(sorted(scope_set))}", err=True)
    click.echo("store it now: it cannot be shown again", err=True)
    click.echo(key.token)


@keys.command("list")
def keys_list() -> None:
    """Every key: prefix, platform, scopes, created, revoked."""
    from ..db.platforms import list_keys

    with _database().read() as session:
        rows = list_keys(session)
    rows_text = [
        (
            key.prefix,
            platform.name,
            key.scopes,
            key.created_at.isoformat(timespec="seconds"),
            key.revoked_at.isoformat(timespec="seconds") if key.revoked_at else "-",
        )
        for key, platform in rows
    ]
    for line in columns(("prefix", "platform", "scopes", "created", "revoked"), rows_text):
        click.echo(line)


def columns(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> list[str]:
    """Rows as aligned text columns, each as wide as its widest cell."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=True)]
    return [
        "  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in (header, *rows)
    ]


@keys.command("revoke")
@click.argument("prefix")
def keys_revoke(prefix: str) -> None:
    """Revoke the key with this prefix (the 8 characters after 'wb_')."""
    from ..db.platforms import revoke_key

    with _database().write() as session:
        key = revoke_key(session, prefix)
    if key is None:
        raise click.ClickException(f"no key with prefix {prefix!r}")
    click.echo(f"revoked {prefix}")


@main.command("demo-data")
@click.option("--learners", default=200, show_default=True, type=click.IntRange(1, 1_000_000))
@click.option("--seed", default=1, show_default=True, type=int, help="Same seed, same cohort: nothing stored twice.")
@click.option("--platform", "platform_name", default="demo", show_default=True)
def demo_data(learners: int, seed: int, platform_name: str) -> None:
    """Store a synthetic cohort for demos and benchmarks (idempotent per seed)."""
    from ..demo import load
    from ..lessons import load_lessons

    settings = _settings()
    lessons = load_lessons(settings.content_dir)
    with click.progressbar(length=learners, label=f"{learners} learners", file=sys.stderr) as bar:
        counts = load(_database(), lessons, learners, seed=seed, platform=platform_name, progress=bar.update)
    click.echo(
        f"platform {platform_name}: {counts['events_created']} events stored, {counts['events_replayed']} "
        f"already there, {counts['exercise_checks']} exercise checks"
    )


@main.group("xapi")
def xapi_group() -> None:
    """Forward platforms' statements to their own LRS."""


@xapi_group.command("configure")
@click.option("--platform", "platform_name", required=True)
@click.option("--endpoint", required=True, help="The LRS's xAPI base, e.g. https://lrs.example.org/xAPI/")
@click.option("--username", required=True)
@click.option("--password", required=True, prompt=True, hide_input=True)
def xapi_configure(platform_name: str, endpoint: str, username: str, password: str) -> None:
    """Set where a platform's statements are forwarded (Basic auth)."""
    from ..xapi.forward import configure

    try:
        configure(_database(), platform_name, endpoint, username, password)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"platform {platform_name}: statements go to {endpoint}")


@xapi_group.command("forward")
@click.option("--loop", is_flag=True, help="Keep forwarding (production); otherwise one pass.")
@click.option("--interval", default=30.0, show_default=True, help="Seconds between passes with --loop.")
@click.option("--batch", default=100, show_default=True)
def xapi_forward(loop: bool, interval: float, batch: int) -> None:
    """Send every platform's new statements to its LRS."""
    import time

    from ..lessons import load_catalog
    from ..xapi.forward import forward_once

    settings = _settings()
    db = _database()
    lessons = load_catalog(settings.content_dir)
    while True:
        report = forward_once(
            db, lessons, settings.activity_base, batch=batch, settle_seconds=settings.export_settle_seconds
        )
        if not report and not loop:
            click.echo("no platform forwards statements yet: nothing to send (workbench xapi configure ...)")
        for platform, outcome in sorted(report.items()):
            click.echo(f"{platform}: {_forwarded(outcome)}")
        if not loop:
            if any(o.get("error") for o in report.values()):
                sys.exit(1)
            return
        time.sleep(interval)


def _forwarded(outcome: dict) -> str:
    """One platform's pass, in words."""
    sent = outcome.get("sent", 0)
    if outcome.get("waiting_until"):
        return f"not tried: after its last failure it waits until {outcome['waiting_until']}"
    if outcome.get("error"):
        return f"sent {sent}, then failed: {outcome['error']} (the next pass retries after {outcome['retry_in']} s)"
    return f"sent {sent}" if sent else "nothing to send"


@xapi_group.command("status")
def xapi_status() -> None:
    """Statements waiting to be forwarded, per platform."""
    from ..xapi.forward import backlog

    for platform, count in sorted(backlog(_database()).items()):
        click.echo(f"{platform}: {count} waiting")


@main.group("rollups")
def rollups_group() -> None:
    """Analytics rollups (reads refresh them when far behind; a loop here keeps reads fast)."""


@rollups_group.command("refresh")
@click.option("--loop", is_flag=True, help="Keep refreshing; otherwise one pass.")
@click.option("--interval", default=10.0, show_default=True, help="Seconds between passes with --loop.")
def rollups_refresh(loop: bool, interval: float) -> None:
    """Roll up every event stored so far (with --loop, also what `db maintain` does, each pass)."""
    import time

    from ..db.analytics.rollup_refresh import refresh

    db, keep_months = _database(), _settings().events_retention_months
    while True:
        click.echo(f"rolled up {refresh(db)} event ids")
        if not loop:
            return
        _maintain(db, keep_months)  # a loop keeps the months made ahead and the retention applied
        time.sleep(interval)


@main.group("lessons")
def lessons_group() -> None:
    """Lessons and their translations (content/lessons/, one folder per locale)."""


@lessons_group.command("check")
def lessons_check() -> None:
    """Every lesson and translation loads, each translation keeps its lesson's structure, and none
    was made from an older English text (exit 1 otherwise, saying which)."""
    from ..lessons.loader import LessonError, load_lessons
    from ..lessons.translations import load_translations, stale_translations

    directory = _settings().content_dir
    try:
        lessons = load_lessons(directory)
    except LessonError as error:
        raise click.ClickException(str(error)) from None
    translations, problems = load_translations(directory, lessons)
    problems += [
        f"{line} (translate the change, then set source_sha256)" for line in stale_translations(directory, lessons)
    ]
    for problem in problems:
        click.echo(problem, err=True)
    count = sum(len(by_locale) for by_locale in translations.values())
    click.echo(f"{len(lessons)} lessons, {count} translations, {len(problems)} problems")
    if problems:
        sys.exit(1)


@main.group("models")
def models_group() -> None:
    """The trained models and the pretrained encoder (docs/models.md)."""


@models_group.command("measure-ablations")
def models_measure_ablations() -> None:
    """Measure every model's heads with each head switched off alone, into ablations.json beside
    its card: every worker then answers a single-head ablation at a plain trace's cost."""
    from ..models import ablations, load

    for model in load(_settings()).values():
        path = ablations.write(model, model.measure_ablation)
        click.echo(f"{model.id}: {model.layers * model.heads} single-head ablations -> {path}")


def _upgrade(settings: Settings, revision: str = "head") -> None:
    from ..db.migrate import upgrade

    upgrade(settings.database_url, revision)


def _redact(url: str) -> str:
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        return f"{scheme}://***@{rest.split('@', 1)[1]}"
    return url


from .analytics import analytics  # noqa: E402  (registered after `main` exists)
from .cmi5 import cmi5  # noqa: E402
from .exercise import exercise  # noqa: E402
from .lti import lti  # noqa: E402

main.add_command(exercise)
main.add_command(lti)
main.add_command(analytics)
main.add_command(cmi5)

if __name__ == "__main__":
    main()
