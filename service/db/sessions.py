"""Browser sessions that were logged out, and learners who were erased: their cookies are
refused until they would have expired. A logged-out session is filed under its sid; an erased
learner under a mark of (platform, learner), so every session of theirs stops at once."""

from __future__ import annotations

import datetime as dt
import hashlib

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from .tables import RevokedSession


def revoke(session: Session, sid: str, expires_at: dt.datetime) -> None:
    if session.get(RevokedSession, sid) is None:
        session.add(RevokedSession(sid=sid, expires_at=expires_at))
    session.execute(delete(RevokedSession).where(RevokedSession.expires_at < dt.datetime.now(dt.UTC)))


def is_revoked(session: Session, sid: str) -> bool:
    return session.scalar(select(RevokedSession.sid).where(RevokedSession.sid == sid)) is not None


def learner_mark(platform_id: int | None, learner: str) -> str:
    """What an erased learner's sessions are refused under (32 hex digits, as a sid; the id itself
    is not kept)."""
    return "e" + hashlib.sha256(f"{platform_id}\n{learner}".encode()).hexdigest()[:31]


def revoked_of(session: Session, *marks: str) -> set[str]:
    """Which of `marks` (sids, learner marks) are refused."""
    return set(session.scalars(select(RevokedSession.sid).where(RevokedSession.sid.in_(marks))))


def restore(session: Session, mark: str) -> None:
    """A platform launched the learner again (LTI): their new session is theirs."""
    session.execute(delete(RevokedSession).where(RevokedSession.sid == mark))
