"""LTI 1.3: the platforms registered as LTI platforms, the tool's own signing keys, and the
short-lived values of a launch (state, nonce) that must outlive one request."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import JSON, Boolean, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base
from .types import UTCDateTime, utcnow


class LtiRegistration(Base):
    """One LTI platform's registration of this tool: an issuer and the client id it gave us.
    Its learners are the learners of `platform_id`, one of our platforms."""

    __tablename__ = "lti_registrations"
    __table_args__ = (UniqueConstraint("issuer", "client_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    platform_id: Mapped[int] = mapped_column(ForeignKey("platforms.id", ondelete="CASCADE"), index=True)
    issuer: Mapped[str] = mapped_column(String(255))
    client_id: Mapped[str] = mapped_column(String(255))
    deployment_ids: Mapped[list[str]] = mapped_column(JSON, default=list)
    auth_login_url: Mapped[str] = mapped_column(String(1024))
    auth_token_url: Mapped[str] = mapped_column(String(1024))
    auth_audience: Mapped[str | None] = mapped_column(String(1024), nullable=True)
    keyset_url: Mapped[str | None] = mapped_column(String(1024), nullable=True)
    keyset: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)  # pasted JWKS
    # Hosts its deep-linking return URLs may be on besides those of the URLs above (a Canvas
    # school's own domain, say); None: those alone.
    return_hosts: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)
    # "command" (`workbench lti register`) or "dynamic" (the platform opened an invitation: service/lti/dynamic.py)
    registered_by: Mapped[str] = mapped_column(String(16), default="command", server_default="command")
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)


class LtiLearnerCourse(Base):
    """The course a launched learner last opened a lesson from: the platform's context id, which the
    lesson's xAPI statements name as their parent activity (service/xapi/statements.py)."""

    __tablename__ = "lti_learner_courses"
    __table_args__ = (UniqueConstraint("platform_id", "learner", "lesson"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    platform_id: Mapped[int] = mapped_column(ForeignKey("platforms.id", ondelete="CASCADE"))
    learner: Mapped[str] = mapped_column(String(128))
    lesson: Mapped[str] = mapped_column(String(64))
    registration_id: Mapped[int] = mapped_column(ForeignKey("lti_registrations.id", ondelete="CASCADE"))
    course: Mapped[str] = mapped_column(String(255))  # the platform's context id
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)


class LtiKey(Base):
    """The tool's RSA signing keys: one signs (`active`), every published one is in /lti/jwks."""

    __tablename__ = "lti_keys"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kid: Mapped[str] = mapped_column(String(64), unique=True)
    private_pem: Mapped[str] = mapped_column(Text)
    active: Mapped[bool] = mapped_column(Boolean, default=False)
    published: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)


class LtiValue(Base):
    """What pylti1p3 keeps between the login and the launch (state parameters, nonces) and
    after it (the launch's claims): a key, a JSON value, an expiry."""

    __tablename__ = "lti_values"

    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    value: Mapped[Any] = mapped_column(JSON)
    expires_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, index=True)


class LtiGradeLink(Base):
    """A launched learner's line item: where their score for a lesson goes, and the score the
    platform last accepted. The outbox of grades is every link whose learner now has another
    count of completed checkpoints than `sent` (service/lti/grades.py)."""

    __tablename__ = "lti_grade_links"
    __table_args__ = (
        UniqueConstraint("registration_id", "lineitem", "learner"),
        Index("ix_lti_grade_links_platform_learner", "platform_id", "learner"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    registration_id: Mapped[int] = mapped_column(ForeignKey("lti_registrations.id", ondelete="CASCADE"))
    platform_id: Mapped[int] = mapped_column(ForeignKey("platforms.id", ondelete="CASCADE"))
    learner: Mapped[str] = mapped_column(String(128))
    lesson: Mapped[str] = mapped_column(String(64))
    lineitem: Mapped[str] = mapped_column(String(1024))
    user_id: Mapped[str] = mapped_column(String(255))  # the platform's `sub`: scores name the user by it
    sent: Mapped[int | None] = mapped_column(Integer, nullable=True)
    failures: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime, nullable=True)
    last_error: Mapped[str | None] = mapped_column(String(1024), nullable=True)
