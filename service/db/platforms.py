"""Platforms and their API keys."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import bindparam, select
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from ..identity import NewKey, Principal, hash_token, new_key, parse_token, token_matches
from .tables import ApiKey, Platform, utcnow


def home_page_for(name: str) -> str:
    return f"https://{name}.platforms.attention-workbench.invalid"


def ensure_platform(session: Session, name: str, home_page: str | None = None) -> Platform:
    platform = session.scalar(select(Platform).where(Platform.name == name))
    if platform is None:
        platform = Platform(name=name, home_page=home_page or home_page_for(name))
        session.add(platform)
        session.flush()
    return platform


def create_key(
    session: Session, platform_name: str, scopes: frozenset[str], label: str = ""
) -> tuple[NewKey, Platform]:
    platform = ensure_platform(session, platform_name)
    key = new_key()
    session.add(
        ApiKey(
            platform_id=platform.id,
            prefix=key.prefix,
            secret_hash=hash_token(key.token),
            scopes=",".join(sorted(scopes)),
            label=label,
        )
    )
    session.flush()
    return key, platform


def list_keys(session: Session) -> list[tuple[ApiKey, Platform]]:
    rows = session.execute(select(ApiKey, Platform).join(Platform).order_by(Platform.name, ApiKey.created_at))
    return [(k, p) for k, p in rows]


def revoke_key(session: Session, prefix: str) -> ApiKey | None:
    key = session.scalar(select(ApiKey).where(ApiKey.prefix == prefix))
    if key is not None and key.revoked_at is None:
        key.revoked_at = utcnow()
    return key


_KEY_LOOKUP = (
    select(ApiKey.secret_hash, ApiKey.scopes, ApiKey.revoked_at, Platform.id, Platform.name)
    .join(Platform, Platform.id == ApiKey.platform_id)
    .where(ApiKey.prefix == bindparam("prefix"))
)


def authenticate(conn: Connection | Session, token: str) -> Principal | None:
    """The principal of a live key, or None (unknown, malformed, revoked, wrong secret)."""
    prefix = parse_token(token)
    if prefix is None:
        return None
    row = conn.execute(_KEY_LOOKUP, {"prefix": prefix}).first()
    if row is None:
        return None
    secret_hash, scopes, revoked_at, platform_id, platform_name = row
    if revoked_at is not None or not token_matches(token, secret_hash):
        return None
    return Principal(
        platform_id=platform_id,
        platform=platform_name,
        scopes=frozenset(s for s in scopes.split(",") if s),
        key_prefix=prefix,
    )


def platform_by_name(session: Session, name: str) -> Platform | None:
    return session.scalar(select(Platform).where(Platform.name == name))


def is_revoked(key: ApiKey) -> bool:
    return key.revoked_at is not None and key.revoked_at <= dt.datetime.now(dt.UTC)
