"""`workbench lti`: register LTI 1.3 platforms, and keep the tool's signing keys (docs/lti.md)."""

from __future__ import annotations

import json

import click

from .common import _database, _settings


@click.group()
def lti() -> None:
    """LTI 1.3 platforms and the tool's keys."""


@lti.command("register")
@click.option("--issuer", required=True, help="The platform's issuer (iss), as its id_tokens say it.")
@click.option("--client-id", required=True, help="The client id the platform gave this tool.")
@click.option("--deployment-id", "deployment_ids", required=True, multiple=True, help="A deployment id (repeatable).")
@click.option("--auth-login-url", required=True, help="The platform's OIDC authorization endpoint.")
@click.option("--auth-token-url", required=True, help="The platform's OAuth2 token endpoint.")
@click.option("--auth-audience", default=None, help="The token endpoint's audience, when not its URL.")
@click.option("--keyset-url", default=None, help="The platform's JWKS URL.")
@click.option("--keyset-file", type=click.File(), default=None, help="The platform's JWKS, as a file.")
@click.option("--platform", "platform_name", required=True, help="Our platform its learners belong to.")
@click.option(
    "--return-host",
    "return_hosts",
    multiple=True,
    help="A host its deep-linking return URLs may be on, besides its issuer's and URLs' hosts (repeatable).",
)
def register(keyset_file, platform_name: str, deployment_ids, return_hosts, **urls) -> None:
    """Register a platform (or update the registration of the same issuer and client id)."""
    from ..lti.registrations import NewRegistration, RegistrationError
    from ..lti.registrations import register as store

    try:
        keyset = json.load(keyset_file) if keyset_file else None
    except ValueError as e:
        raise click.ClickException(f"the key set file is not JSON: {e}") from None
    new = NewRegistration(
        platform=platform_name,
        deployment_ids=tuple(deployment_ids),
        return_hosts=tuple(return_hosts),
        keyset=keyset,
        **urls,
    )
    try:
        with _database().write() as session:
            row = store(session, new)
            click.echo(f"registered {row.id}: {row.issuer} client {row.client_id} -> platform {platform_name}")
    except RegistrationError as e:
        raise click.ClickException(str(e)) from None


@lti.command("invite")
@click.option("--platform", "platform_name", required=True, help="Our platform its learners will belong to.")
@click.option("--hours", default=24.0, show_default=True, help="How long the invitation stays good (it is good once).")
def invite(platform_name: str, hours: float) -> None:
    """Print a registration URL to paste into the platform (LTI Dynamic Registration): good once."""
    from ..lti.dynamic import invite as new_invitation

    if not 0 < hours <= 24 * 30:
        raise click.ClickException("an invitation lasts more than 0 and at most 720 hours")
    with _database().write() as session:
        token = new_invitation(session, platform_name, int(hours * 3600))
    click.echo(f"{_settings().public_base}/lti/register?invitation={token}")
    click.echo(
        f"Paste it into the platform's tool registration (Moodle: Register a tool by URL) within {hours:g} hours."
    )


@lti.command("list")
def listing() -> None:
    """Every registered platform."""
    from ..lti.registrations import listing as rows

    with _database().read() as session:
        for row, platform in rows(session):
            keys = row.keyset_url or "key set file"
            deployments = ",".join(row.deployment_ids)
            click.echo(
                f"{row.id}\t{platform}\t{row.issuer}\t{row.client_id}\t{deployments}\t{keys}\t{row.registered_by}"
            )


@lti.command("remove")
@click.argument("registration_id", type=int)
def remove(registration_id: int) -> None:
    """Remove a registration (its learners' data stays with their platform)."""
    from ..lti.registrations import remove as drop

    with _database().write() as session:
        if not drop(session, registration_id):
            raise click.ClickException(f"no registration {registration_id} (see `workbench lti list`)")
    click.echo(f"removed registration {registration_id}")


@lti.command("rotate-key")
def rotate_key() -> None:
    """Sign with a new key from now on; the old one stays in /lti/jwks until retired."""
    from ..lti.keys import rotate

    with _database().write() as session:
        click.echo(f"signing with {rotate(session).kid}")


@lti.command("retire-key")
@click.argument("kid")
def retire_key(kid: str) -> None:
    """Take an old key out of /lti/jwks."""
    from ..lti.keys import retire

    with _database().write() as session:
        if not retire(session, kid):
            raise click.ClickException(f"{kid} is not a key that has been rotated out")
    click.echo(f"retired {kid}")


@lti.command("grades")
@click.option("--loop", is_flag=True, help="Keep sending; otherwise one pass.")
@click.option("--interval", default=10.0, show_default=True, help="Seconds between passes with --loop.")
def send_grades(loop: bool, interval: float) -> None:
    """Send launched learners' changed scores to their platforms' line items."""
    import time

    from ..lessons import load_lessons
    from ..lti.grades import send_once

    db, lessons = _database(), load_lessons(_settings().content_dir)
    while True:
        report = send_once(db, lessons)
        click.echo(f"sent {report['sent']} scores, {report['failed']} failed (retried later)")
        if not loop:
            return
        time.sleep(interval)
