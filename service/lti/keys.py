"""The tool's RSA signing keys: made on first use, rotated on demand, published at /lti/jwks.

A rotation makes a new key the signing one and keeps the old one published, so platforms that
cached the old key set still verify what was signed with it, until `retire` takes it out."""

from __future__ import annotations

import json
import secrets
from typing import Any

from jwcrypto.jwk import JWK
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from ..db.engine import Database
from ..db.lti_tables import LtiKey

ALGORITHM = "RS256"


def signing(db: Database) -> tuple[str, str]:
    """(kid, private PEM) of the signing key: read, and written only the first time, so the
    key set and launches never take the write lock once the key exists."""
    with db.read() as session:
        key = session.scalar(select(LtiKey).where(LtiKey.active.is_(True)))
        if key is not None:
            return key.kid, key.private_pem
    with db.write() as session:
        key = signing_key(session)
        return key.kid, key.private_pem


def signing_key(session: Session) -> LtiKey:
    """The key the tool signs with; made (and stored) the first time one is needed."""
    key = session.scalar(select(LtiKey).where(LtiKey.active.is_(True)))
    return key if key is not None else rotate(session)


def rotate(session: Session) -> LtiKey:
    """A new signing key; the previous one stays published."""
    session.execute(update(LtiKey).where(LtiKey.active.is_(True)).values(active=False))
    jwk = JWK.generate(kty="RSA", size=2048)
    key = LtiKey(
        kid=secrets.token_hex(8),
        private_pem=jwk.export_to_pem(private_key=True, password=None).decode(),
        active=True,
        published=True,
    )
    session.add(key)
    session.flush()
    return key


def retire(session: Session, kid: str) -> bool:
    """Take a key that no longer signs out of the key set; False if no such key, or it signs."""
    key = session.scalar(select(LtiKey).where(LtiKey.kid == kid))
    if key is None or key.active:
        return False
    key.published = False
    return True


def public_jwk(key: LtiKey) -> dict[str, Any]:
    jwk = JWK.from_pem(key.private_pem.encode())
    public = json.loads(jwk.export_public())
    return {**public, "kid": key.kid, "alg": ALGORITHM, "use": "sig"}


def key_set(session: Session) -> dict[str, list[dict[str, Any]]]:
    """The JWKS platforms verify the tool's messages with (signing key first)."""
    keys = session.scalars(
        select(LtiKey).where(LtiKey.published.is_(True)).order_by(LtiKey.active.desc(), LtiKey.id.desc())
    )
    return {"keys": [public_jwk(k) for k in keys]}
