"""Typed models. The schema changes only through Alembic migrations (migrations/versions)."""

from __future__ import annotations

import datetime as dt
from typing import Any, cast

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base
from .types import UTCDateTime, utcnow

# SQLite only auto-increments INTEGER PRIMARY KEY; PostgreSQL gets BIGINT identity.
BigId = BigInteger().with_variant(Integer(), "sqlite")


def cast_table(model: type[Base]) -> Table:
    """A model's table, typed as the Table it is (for Core statements)."""
    return cast(Table, model.__table__)


class Platform(Base):
    """A course platform (tenant). `web` is the built-in front end."""

    __tablename__ = "platforms"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    home_page: Mapped[str] = mapped_column(String(255))
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)


class ApiKey(Base):
    """A platform's key: only a SHA-256 of the secret is stored; `prefix` finds the row."""

    __tablename__ = "api_keys"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    platform_id: Mapped[int] = mapped_column(ForeignKey("platforms.id", ondelete="CASCADE"), index=True)
    prefix: Mapped[str] = mapped_column(String(16), unique=True)
    secret_hash: Mapped[str] = mapped_column(String(64))
    scopes: Mapped[str] = mapped_column(String(255))
    label: Mapped[str] = mapped_column(String(128), default="")
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    revoked_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime, nullable=True)

    @property
    def scope_set(self) -> frozenset[str]:
        return frozenset(s for s in self.scopes.split(",") if s)


class Event(Base):
    """One learner event, exactly once per (platform, client event id)."""

    __tablename__ = "events"
    __table_args__ = (
        UniqueConstraint("platform_id", "event_id"),
        Index("ix_events_platform_learner", "platform_id", "learner", "id"),
        Index("ix_events_platform_lesson_learner", "platform_id", "lesson", "learner", "occurred_at"),
        Index("ix_events_platform_stored", "platform_id", "stored_at", "id"),
        Index("ix_events_platform_lesson_kind", "platform_id", "lesson", "event", "occurred_at"),
        Index("ix_events_platform_occurred", "platform_id", "occurred_at"),
        # Ids never come back after an erasure: the rollups' watermark counts on it.
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    platform_id: Mapped[int] = mapped_column(ForeignKey("platforms.id", ondelete="CASCADE"))
    event_id: Mapped[str] = mapped_column(String(36))
    learner: Mapped[str] = mapped_column(String(128))
    lesson: Mapped[str] = mapped_column(String(64))
    checkpoint: Mapped[str | None] = mapped_column(String(64), nullable=True)
    event: Mapped[str] = mapped_column(String(64))
    instance_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    item: Mapped[str | None] = mapped_column(String(64), nullable=True)  # answered events: the lesson's item
    data: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    occurred_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    stored_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    content_hash: Mapped[str] = mapped_column(String(64))


class LearnerLesson(Base):
    """When a learner first showed up in a lesson (kept on insert, for funnels and durations)."""

    __tablename__ = "learner_lessons"
    __table_args__ = (UniqueConstraint("platform_id", "lesson", "learner"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    platform_id: Mapped[int] = mapped_column(ForeignKey("platforms.id", ondelete="CASCADE"))
    lesson: Mapped[str] = mapped_column(String(64))
    learner: Mapped[str] = mapped_column(String(128))
    first_event_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)


class LearnerLocale(Base):
    """The language a learner last read the service in (their browser's or their platform's
    choice, as `service/i18n.py` picks it), for instructors: progress, exports, the dashboard."""

    __tablename__ = "learner_locales"

    platform_id: Mapped[int] = mapped_column(ForeignKey("platforms.id", ondelete="CASCADE"), primary_key=True)
    learner: Mapped[str] = mapped_column(String(128), primary_key=True)
    locale: Mapped[str] = mapped_column(String(16))
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)


class XapiForwarding(Base):
    """Where a platform's statements go, and how far forwarding has got (survives restarts)."""

    __tablename__ = "xapi_forwarding"

    platform_id: Mapped[int] = mapped_column(ForeignKey("platforms.id", ondelete="CASCADE"), primary_key=True)
    endpoint: Mapped[str] = mapped_column(String(512))
    username: Mapped[str] = mapped_column(String(255))
    password: Mapped[str] = mapped_column(String(255))
    last_stored_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime, nullable=True)
    last_event_row: Mapped[int] = mapped_column(BigInteger, default=0)
    sent: Mapped[int] = mapped_column(BigInteger, default=0)
    failures: Mapped[int] = mapped_column(Integer, default=0)
    last_error: Mapped[str | None] = mapped_column(String(1024), nullable=True)
    next_attempt_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime, nullable=True)


class CheckpointProgress(Base):
    """A learner's completion of one checkpoint; the earliest completing event wins."""

    __tablename__ = "checkpoint_progress"
    __table_args__ = (
        UniqueConstraint("platform_id", "learner", "lesson", "checkpoint"),
        Index("ix_checkpoint_progress_platform_lesson", "platform_id", "lesson", "checkpoint", "completed_at"),
        Index("ix_checkpoint_progress_durations", "platform_id", "lesson", "checkpoint", "seconds_from_start"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    platform_id: Mapped[int] = mapped_column(ForeignKey("platforms.id", ondelete="CASCADE"))
    learner: Mapped[str] = mapped_column(String(128))
    lesson: Mapped[str] = mapped_column(String(64))
    checkpoint: Mapped[str] = mapped_column(String(64))
    completed_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    event_id: Mapped[str] = mapped_column(String(36))
    # Seconds from the learner's first event in the lesson; kept current when an earlier event arrives.
    seconds_from_start: Mapped[float | None] = mapped_column(Float, nullable=True)
    # Test-result checkpoints: "verified" (the server checked a challenge) or "reported" (a platform's
    # own autograder said so); null for the others. Follows the completing event.
    verification: Mapped[str | None] = mapped_column(String(16), nullable=True)


class LearnerManipulation(Base):
    """A learner's earliest report of one of a checkpoint's `manipulations` (all done: it completes)."""

    __tablename__ = "learner_manipulations"
    __table_args__ = (Index("ix_learner_manipulations_lesson", "platform_id", "lesson", "checkpoint", "manipulation"),)

    platform_id: Mapped[int] = mapped_column(ForeignKey("platforms.id", ondelete="CASCADE"), primary_key=True)
    learner: Mapped[str] = mapped_column(String(128), primary_key=True)
    lesson: Mapped[str] = mapped_column(String(64), primary_key=True)
    checkpoint: Mapped[str] = mapped_column(String(64), primary_key=True)
    manipulation: Mapped[str] = mapped_column(String(64), primary_key=True)
    done_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    event_id: Mapped[str] = mapped_column(String(36))


class AnalyticsErasure(Base):
    """A learner erased here and not yet in the analytics store (WORKBENCH_ANALYTICS_URL): the
    sync deletes their rows there, then this row (only written when a store is configured)."""

    __tablename__ = "analytics_erasures"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    platform_id: Mapped[int] = mapped_column(ForeignKey("platforms.id", ondelete="CASCADE"))
    learner: Mapped[str] = mapped_column(String(128))
    requested_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)


class ErasedEvent(Base):
    """Tombstone of an erased learner's event id (hashed): a later replay is acknowledged, not stored."""

    __tablename__ = "erased_events"
    __table_args__ = (UniqueConstraint("platform_id", "event_hash"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    platform_id: Mapped[int] = mapped_column(ForeignKey("platforms.id", ondelete="CASCADE"))
    event_hash: Mapped[str] = mapped_column(String(64))
    erased_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)


class ExerciseCheck(Base):
    """One diagnosis of a learner's exercise output (no learner code ever runs here)."""

    __tablename__ = "exercise_checks"
    __table_args__ = (Index("ix_exercise_checks_platform_diagnosis", "platform_id", "diagnosis", "created_at"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    platform_id: Mapped[int] = mapped_column(ForeignKey("platforms.id", ondelete="CASCADE"))
    learner: Mapped[str | None] = mapped_column(String(128), nullable=True)
    lesson: Mapped[str] = mapped_column(String(64))
    case: Mapped[dict[str, Any]] = mapped_column(JSON)
    correct: Mapped[bool] = mapped_column(Boolean)
    max_abs_error: Mapped[float | None] = mapped_column(Float, nullable=True)
    diagnosis: Mapped[str | None] = mapped_column(String(255), nullable=True)  # comma-separated mistake ids
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)


class ExerciseChallenge(Base):
    """Random cases issued to one learner; answering them correctly completes the exercise's checkpoint.

    The id is a 128-bit random secret: whoever holds it (the learner's terminal) may fetch and answer.
    """

    __tablename__ = "exercise_challenges"
    __table_args__ = (Index("ix_exercise_challenges_platform_learner", "platform_id", "learner", "created_at"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    platform_id: Mapped[int] = mapped_column(ForeignKey("platforms.id", ondelete="CASCADE"))
    learner: Mapped[str] = mapped_column(String(128))
    lesson: Mapped[str] = mapped_column(String(64))
    checkpoint: Mapped[str] = mapped_column(String(64))
    cases: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    solved_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime, nullable=True)
    last_result: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)


class RevokedSession(Base):
    """A browser session ended by logging out: its cookie is refused until it would have expired."""

    __tablename__ = "revoked_sessions"

    sid: Mapped[str] = mapped_column(String(32), primary_key=True)
    revoked_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, index=True)


class StorageUsage(Base):
    """Events and bytes stored per subject (a learner, a browser session, a platform) and quota
    window (service/db/quotas.py); windows that have ended are deleted by `db maintain`."""

    __tablename__ = "storage_usage"

    subject: Mapped[str] = mapped_column(String(200), primary_key=True)
    window_seconds: Mapped[int] = mapped_column(Integer, primary_key=True)
    window_start: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    events: Mapped[int] = mapped_column(BigInteger)
    bytes: Mapped[int] = mapped_column(BigInteger)


class WriteProbe(Base):
    """Empty but for a moment: /readyz writes a page-sized row here and deletes it in the same
    transaction, to learn whether the database takes a write that needs room (service/db/engine.py)."""

    __tablename__ = "write_probe"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    filler: Mapped[str] = mapped_column(Text)


class EventRollup(Base):
    """Events and distinct learners per (lesson, dimension key, time bucket), for every event
    up to the watermark (service/db/analytics/rollups.py). `lesson` '' is every lesson together; `grain`
    'all' has the one bucket ''; `key` is '=' + the value, or '-' when there is none."""

    __tablename__ = "event_rollups"

    platform_id: Mapped[int] = mapped_column(ForeignKey("platforms.id", ondelete="CASCADE"), primary_key=True)
    grain: Mapped[str] = mapped_column(String(8), primary_key=True)
    lesson: Mapped[str] = mapped_column(String(64), primary_key=True)
    dimension: Mapped[str] = mapped_column(String(16), primary_key=True)
    bucket: Mapped[str] = mapped_column(String(19), primary_key=True)
    key: Mapped[str] = mapped_column(String(160), primary_key=True)
    events: Mapped[int] = mapped_column(BigInteger)
    learners: Mapped[int] = mapped_column(BigInteger)


class RollupWatermark(Base):
    """The one row saying up to which event id `event_rollups` holds every event."""

    __tablename__ = "rollup_watermark"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    last_event_id: Mapped[int] = mapped_column(BigInteger)


class LearnerRollup(Base):
    """Learners per (lesson, start day, state): the state lists the checkpoints they completed
    and how each test result was known (service/db/analytics/learner_rollups.py)."""

    __tablename__ = "learner_rollups"

    platform_id: Mapped[int] = mapped_column(ForeignKey("platforms.id", ondelete="CASCADE"), primary_key=True)
    lesson: Mapped[str] = mapped_column(String(64), primary_key=True)
    day: Mapped[str] = mapped_column(String(19), primary_key=True)
    state: Mapped[str] = mapped_column(String(1024), primary_key=True)
    learners: Mapped[int] = mapped_column(BigInteger)


class DurationRollup(Base):
    """Learners per (lesson, checkpoint, whole seconds from their first event to completing it)."""

    __tablename__ = "duration_rollups"

    platform_id: Mapped[int] = mapped_column(ForeignKey("platforms.id", ondelete="CASCADE"), primary_key=True)
    lesson: Mapped[str] = mapped_column(String(64), primary_key=True)
    checkpoint: Mapped[str] = mapped_column(String(64), primary_key=True)
    seconds: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    learners: Mapped[int] = mapped_column(BigInteger)


class RolledLearner(Base):
    """The standing each learner is counted with in `learner_rollups` and `duration_rollups`."""

    __tablename__ = "rolled_learners"

    platform_id: Mapped[int] = mapped_column(ForeignKey("platforms.id", ondelete="CASCADE"), primary_key=True)
    lesson: Mapped[str] = mapped_column(String(64), primary_key=True)
    learner: Mapped[str] = mapped_column(String(128), primary_key=True)
    day: Mapped[str] = mapped_column(String(19))
    state: Mapped[str] = mapped_column(String(1024))
    durations: Mapped[str] = mapped_column(String(2048))


class MistakeRollup(Base):
    """Checks showing each mistake, and the distinct learners they came from, per lesson; kept in
    the check's own transaction (service/db/analytics/mistake_rollups.py)."""

    __tablename__ = "mistake_rollups"

    platform_id: Mapped[int] = mapped_column(ForeignKey("platforms.id", ondelete="CASCADE"), primary_key=True)
    lesson: Mapped[str] = mapped_column(String(64), primary_key=True)
    mistake: Mapped[str] = mapped_column(String(64), primary_key=True)
    checks: Mapped[int] = mapped_column(BigInteger)
    learners: Mapped[int] = mapped_column(BigInteger)


class MistakeLearner(Base):
    """That a learner has made a mistake (at least once) in a lesson: counts them once."""

    __tablename__ = "mistake_learners"

    platform_id: Mapped[int] = mapped_column(ForeignKey("platforms.id", ondelete="CASCADE"), primary_key=True)
    lesson: Mapped[str] = mapped_column(String(64), primary_key=True)
    mistake: Mapped[str] = mapped_column(String(64), primary_key=True)
    learner: Mapped[str] = mapped_column(String(128), primary_key=True)


class RolledAnswer(Base):
    """The latest answers each learner is counted with in `item_rollups`
    (service/db/analytics/item_rollups.py): `phase.item=response:score` entries, sorted, `;`-joined."""

    __tablename__ = "rolled_answers"

    platform_id: Mapped[int] = mapped_column(ForeignKey("platforms.id", ondelete="CASCADE"), primary_key=True)
    lesson: Mapped[str] = mapped_column(String(64), primary_key=True)
    learner: Mapped[str] = mapped_column(String(128), primary_key=True)
    state: Mapped[str] = mapped_column(Text)


class ItemRollup(Base):
    """Sums over learners' latest answers per lesson, added to and taken from as learners move:
    `choice` rows count learners per (phase, item, response, score); `pair` rows per (phase,
    item) hold n, sum x, sum y, sum xy, sum y^2 of the item's score x and the rest score y;
    `gain` rows per (pre items, post items) answered hold learners, sum of pre and post scores."""

    __tablename__ = "item_rollups"

    platform_id: Mapped[int] = mapped_column(ForeignKey("platforms.id", ondelete="CASCADE"), primary_key=True)
    lesson: Mapped[str] = mapped_column(String(64), primary_key=True)
    dimension: Mapped[str] = mapped_column(String(8), primary_key=True)
    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    learners: Mapped[int] = mapped_column(BigInteger)
    sx: Mapped[int] = mapped_column(BigInteger)
    sy: Mapped[int] = mapped_column(BigInteger)
    sxy: Mapped[int] = mapped_column(BigInteger)
    syy: Mapped[int] = mapped_column(BigInteger)


from . import lti_tables  # noqa: E402, F401  (LTI's tables, on the same metadata)
