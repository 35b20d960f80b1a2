"""Registering LTI platforms: an issuer and client id, the platform's URLs and keys, and which
of our platforms its learners belong to."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..db.lti_tables import LtiRegistration
from ..db.platforms import ensure_platform
from ..db.tables import Platform

HOST = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?(?::[0-9]{1,5})?")


def allowed_hosts(row: LtiRegistration) -> frozenset[str]:
    """Where this platform's deep-linking responses may go: the hosts of its issuer and its
    registered URLs, and the return hosts registered with it."""
    urls = [row.issuer, row.auth_login_url, row.auth_token_url, row.keyset_url or ""]
    hosts = {urlsplit(u).netloc.lower() for u in urls if u.startswith(("https://", "http://"))}
    return frozenset(hosts | set(row.return_hosts or ())) - {""}


class RegistrationError(ValueError):
    """A registration that cannot be stored as given (the message says why)."""


@dataclass(frozen=True)
class NewRegistration:
    platform: str
    issuer: str
    client_id: str
    deployment_ids: tuple[str, ...]
    auth_login_url: str
    auth_token_url: str
    keyset_url: str | None = None
    keyset: dict[str, Any] | None = None
    auth_audience: str | None = None
    return_hosts: tuple[str, ...] = ()  # deep-linking return URLs' hosts besides its URLs' own
    registered_by: str = "command"  # or "dynamic": the platform registered the tool itself

    def check(self) -> None:
        if (self.keyset_url is None) == (self.keyset is None):
            raise RegistrationError("give the platform's keys as a key set URL or as a key set file, one of them")
        if self.keyset is not None and not isinstance(self.keyset.get("keys"), list):
            raise RegistrationError('the key set file must be a JWKS: {"keys": [...]}')
        urls = [self.auth_login_url, self.auth_token_url, self.keyset_url or "https://"]
        if not all(u.startswith(("https://", "http://")) for u in urls):
            raise RegistrationError("the platform's URLs must be http(s) URLs")
        if not self.deployment_ids:
            raise RegistrationError("give at least one deployment id")
        for host in self.return_hosts:
            if not HOST.fullmatch(host):
                raise RegistrationError(
                    f"a return host is a host name, with a port if any (lms.example.edu), not {host!r}"
                )


def register(session: Session, new: NewRegistration) -> LtiRegistration:
    """Store `new` (or replace the registration of the same issuer and client id; a platform registering itself
    replaces only its own earlier dynamic registration)."""
    new.check()
    # a platform registering itself is known by its issuer: its learners' xAPI accounts name that home page
    home = "{0.scheme}://{0.netloc}".format(urlsplit(new.issuer)) if new.registered_by == "dynamic" else None
    platform = ensure_platform(session, new.platform, home_page=home)
    found = find(session, new.issuer, new.client_id)
    if (
        found
        and new.registered_by == "dynamic"
        and (found.registered_by != "dynamic" or found.platform_id != platform.id)
    ):
        raise RegistrationError(
            "this issuer and client id are registered already, by an administrator or for another platform: "
            "remove that registration first (workbench lti list, workbench lti remove)"
        )
    registration = found or LtiRegistration(issuer=new.issuer, client_id=new.client_id)
    registration.platform_id = platform.id
    registration.deployment_ids = list(new.deployment_ids)
    registration.auth_login_url = new.auth_login_url
    registration.auth_token_url = new.auth_token_url
    registration.auth_audience = new.auth_audience
    registration.keyset_url = new.keyset_url
    registration.keyset = new.keyset
    registration.return_hosts = sorted({h.lower() for h in new.return_hosts}) or None
    registration.registered_by = new.registered_by
    session.add(registration)
    session.flush()
    return registration


def find(session: Session, issuer: str, client_id: str | None) -> LtiRegistration | None:
    """The registration of `issuer` with `client_id` (None: the issuer's only one)."""
    query = select(LtiRegistration).where(LtiRegistration.issuer == issuer)
    if client_id is not None:
        return session.scalar(query.where(LtiRegistration.client_id == client_id))
    found = session.scalars(query.limit(2)).all()
    return found[0] if len(found) == 1 else None


def listing(session: Session) -> list[tuple[LtiRegistration, str]]:
    """Every registration with its platform's name."""
    rows = session.execute(
        select(LtiRegistration, Platform.name)
        .join(Platform, Platform.id == LtiRegistration.platform_id)
        .order_by(LtiRegistration.id)
    )
    return [(r, name) for r, name in rows]


def remove(session: Session, registration_id: int) -> bool:
    found = session.get(LtiRegistration, registration_id)
    if found is None:
        return False
    session.delete(found)
    return True
