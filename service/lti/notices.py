"""LTI Platform Notification Service 1.0 (https://www.imsglobal.org/spec/lti-pns/v1p0/main): a
registered platform posts notices to `POST /lti/notices` as `{"notices": [{"jwt": ...}, ...]}`, each
a JWT it signs as it signs a launch. Each is checked as a launch is (the platform's key set, RS256,
the audience our client id, the issuer, exp and iat, a nonce never seen before, a deployment of the
registration) and the batch is acted on only if every notice holds: a forged, replayed or unsigned
notice refuses the batch and nothing is done.

What a tool holding learners' data acts on, by notice type (PNS 1.0 names only LtiHelloWorldNotice,
LtiContextCopyNotice and LtiAssetProcessorSubmissionNotice; the two below are this tool's names,
docs/lti.md and docs/decisions.md): a user's data deleted on the platform erases that learner here,
as `DELETE /learners/{id}` does; a deployment removed stops further launches from it. Every other
type is acknowledged and logged."""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
from collections.abc import Callable
from typing import Any

import jwt
import requests
from sqlalchemy import delete
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from ..db.lti_tables import LtiRegistration, LtiValue
from . import registrations
from .tool import CLAIM, LEEWAY_SECONDS, PatientSession, pseudonym

NOTICE = CLAIM + "notice"
USER_DELETED = "LtiUserDataDeletionNotice"  # claims: sub, the platform's id of the user whose data is deleted
DEPLOYMENT_REMOVED = "LtiDeploymentDeletionNotice"  # the notice's own deployment_id is removed
LATEST_EXP = 253402300799 - LEEWAY_SECONDS  # 9999-12-31T23:59:59Z, the last second a timestamp holds, less leeway
log = logging.getLogger("service.lti")


class NoticeRefused(Exception):
    """A notice this tool does not accept: the batch is refused, nothing acted on (the message says why)."""


def verified(session: Session, token: Any) -> tuple[LtiRegistration, dict[str, Any]]:
    """A notice's registration and claims, or why it is refused."""
    if not isinstance(token, str) or token.count(".") != 2:
        raise NoticeRefused("a notice is a signed JWT (its jwt member)")
    try:
        header = jwt.get_unverified_header(token)
        unverified = jwt.decode(token, options={"verify_signature": False})
    except jwt.InvalidTokenError as e:
        raise NoticeRefused(f"a notice is not a readable JWT ({e})") from None
    if header.get("alg") != "RS256":
        raise NoticeRefused(f"a notice must be signed with RS256, not {header.get('alg')!r}")
    aud = unverified.get("aud")
    audiences: list[Any] = aud if isinstance(aud, list) else [aud]
    issuer = unverified.get("iss")
    found = [registrations.find(session, issuer, str(a)) for a in audiences if isinstance(issuer, str) and a]
    row = next((r for r in found if r is not None), None)
    if row is None:
        raise NoticeRefused(f"no platform is registered with issuer {issuer!r} for audience {audiences!r}")
    try:
        claims = jwt.decode(
            token,
            _key(row, header.get("kid")),
            algorithms=["RS256"],
            audience=row.client_id,
            issuer=row.issuer,
            leeway=LEEWAY_SECONDS,
            options={"require": ["exp", "iat", "iss", "aud", "nonce"]},
        )
    except jwt.InvalidTokenError as e:
        raise NoticeRefused(f"a notice is not acceptable: {e}") from None
    if claims["exp"] > LATEST_EXP:  # its nonce could not be kept until then: refused, nothing done
        raise NoticeRefused(f"a notice's exp must be at most {LATEST_EXP} (a time this tool can record)")
    if claims.get(CLAIM + "deployment_id") not in row.deployment_ids:
        deployment = claims.get(CLAIM + "deployment_id")
        raise NoticeRefused(f"a notice names a deployment this registration does not have: {deployment!r}")
    notice = claims.get(NOTICE)
    if not isinstance(notice, dict) or not all(isinstance(notice.get(k), str) for k in ("id", "timestamp", "type")):
        raise NoticeRefused("a notice's notice claim must give its id, timestamp and type")
    if session.get(LtiValue, _nonce_key(row, claims)) is not None:
        raise NoticeRefused(f"notice {notice['id']!r} was already received (its nonce is spent)")
    return row, claims


def _key(row: LtiRegistration, kid: Any) -> Any:
    """The platform's public key that signed it: from the key set pasted or fetched, by kid."""
    key_set = row.keyset
    if key_set is None:
        try:
            with PatientSession() as fetch:
                key_set = fetch.get(str(row.keyset_url)).json()
        except (requests.RequestException, ValueError) as e:
            raise NoticeRefused(f"the platform's key set could not be read ({e})") from None
    keys = [k for k in (key_set or {}).get("keys", []) if isinstance(k, dict)]
    match = [k for k in keys if k.get("kid") == kid] if kid is not None else keys[:1]
    if not match:
        raise NoticeRefused(f"the platform's key set has no key {kid!r}")
    return jwt.PyJWK(match[0]).key


def _nonce_key(row: LtiRegistration, claims: dict[str, Any]) -> str:
    return "lti-notice-" + hashlib.sha256(f"{row.id}\n{claims['nonce']}".encode()).hexdigest()


def receive(db: Any, tokens: list[Any], erase: Callable[[int, str], Any]) -> list[dict[str, str]]:
    """Check every notice of a batch, record their nonces, then act on each: what was done to each, in order.
    A refused notice refuses the batch before anything is done (NoticeRefused); so does a nonce another copy
    recorded first, which makes concurrent copies of a notice act once."""
    with db.read() as session:
        checked = [verified(session, token) for token in tokens]
    spent = [_nonce_key(row, claims) for row, claims in checked]
    if len(set(spent)) != len(spent):
        raise NoticeRefused("a batch holds the same notice twice (a nonce repeated)")
    try:
        with db.write() as session:  # the nonces first, committed: a copy racing this batch finds them spent
            for (_, claims), key in zip(checked, spent, strict=True):
                session.add(LtiValue(key=key, value={"notice": claims[NOTICE]["id"]}, expires_at=_until(claims)))
    except IntegrityError:
        raise NoticeRefused("a notice of this batch was already received (its nonce is spent)") from None
    try:
        for row, claims in checked:
            if claims[NOTICE]["type"] == USER_DELETED and isinstance(claims.get("sub"), str) and claims["sub"]:
                erase(row.platform_id, pseudonym(row.issuer, claims["sub"]))  # its own transactions
        with db.write() as session:
            return [_settle(session, session.get(LtiRegistration, row.id), claims) for row, claims in checked]
    except Exception:
        with db.write() as session:  # nothing done for good: the platform may send the batch again
            session.execute(delete(LtiValue).where(LtiValue.key.in_(spent)))
        raise


def _until(claims: dict[str, Any]) -> dt.datetime:
    """How long a notice's nonce is kept: until its exp (and the leeway), which verified() bounded."""
    return dt.datetime.fromtimestamp(claims["exp"] + LEEWAY_SECONDS, dt.UTC)


def _settle(session: Session, row: LtiRegistration | None, claims: dict[str, Any]) -> dict[str, str]:
    """A removed deployment's launches refused from now on; what was done, logged."""
    notice = claims[NOTICE]
    done = {USER_DELETED: "erased", DEPLOYMENT_REMOVED: "deployment removed"}.get(notice["type"], "acknowledged")
    if notice["type"] == DEPLOYMENT_REMOVED and row is not None:
        row.deployment_ids = [d for d in row.deployment_ids if d != claims[CLAIM + "deployment_id"]]
    log.info("notice %s (%s) from %s: %s", notice["id"], notice["type"], claims["iss"], done)
    return {"id": notice["id"], "type": notice["type"], "done": done}
