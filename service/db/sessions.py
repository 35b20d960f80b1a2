"""Browser sessions that were logged out: refused until their cookie would have expired."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from .tables import RevokedSession


def revoke(session: Session, sid: str, expires_at: dt.datetime) -> None:
    if session.get(RevokedSession, sid) is None:
        session.add(RevokedSession(sid=sid, expires_at=expires_at))
    session.execute(delete(RevokedSession).where(RevokedSession.expires_at < dt.datetime.now(dt.UTC)))


def is_revoked(session: Session, sid: str) -> bool:
    return session.scalar(select(RevokedSession.sid).where(RevokedSession.sid == sid)) is not None
