"""Learner data: platforms, keys, events, progress, first visits, erasures, exercise checks, xAPI forwarding.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from alembic import op
import sqlalchemy as sa


revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:

    op.create_table(
        "platforms",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("home_page", sa.String(length=255), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_platforms")),
        sa.UniqueConstraint("name", name=op.f("uq_platforms_name")),
    )
    op.create_table(
        "api_keys",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("platform_id", sa.Integer(), nullable=False),
        sa.Column("prefix", sa.String(length=16), nullable=False),
        sa.Column("secret_hash", sa.String(length=64), nullable=False),
        sa.Column("scopes", sa.String(length=255), nullable=False),
        sa.Column("label", sa.String(length=128), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["platform_id"], ["platforms.id"], name=op.f("fk_api_keys_platform_id_platforms"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_keys")),
        sa.UniqueConstraint("prefix", name=op.f("uq_api_keys_prefix")),
    )
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_api_keys_platform_id"), ["platform_id"], unique=False)

    op.create_table(
        "checkpoint_progress",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False),
        sa.Column("platform_id", sa.Integer(), nullable=False),
        sa.Column("learner", sa.String(length=128), nullable=False),
        sa.Column("lesson", sa.String(length=64), nullable=False),
        sa.Column("checkpoint", sa.String(length=64), nullable=False),
        sa.Column("completed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("event_id", sa.String(length=36), nullable=False),
        sa.Column("seconds_from_start", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(
            ["platform_id"],
            ["platforms.id"],
            name=op.f("fk_checkpoint_progress_platform_id_platforms"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_checkpoint_progress")),
        sa.UniqueConstraint(
            "platform_id",
            "learner",
            "lesson",
            "checkpoint",
            name=op.f("uq_checkpoint_progress_platform_id_learner_lesson_checkpoint"),
        ),
    )
    with op.batch_alter_table("checkpoint_progress", schema=None) as batch_op:
        batch_op.create_index(
            "ix_checkpoint_progress_durations",
            ["platform_id", "lesson", "checkpoint", "seconds_from_start"],
            unique=False,
        )
        batch_op.create_index(
            "ix_checkpoint_progress_platform_lesson",
            ["platform_id", "lesson", "checkpoint", "completed_at"],
            unique=False,
        )

    op.create_table(
        "erased_events",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False),
        sa.Column("platform_id", sa.Integer(), nullable=False),
        sa.Column("event_hash", sa.String(length=64), nullable=False),
        sa.Column("erased_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["platform_id"], ["platforms.id"], name=op.f("fk_erased_events_platform_id_platforms"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_erased_events")),
        sa.UniqueConstraint("platform_id", "event_hash", name=op.f("uq_erased_events_platform_id_event_hash")),
    )
    op.create_table(
        "events",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False),
        sa.Column("platform_id", sa.Integer(), nullable=False),
        sa.Column("event_id", sa.String(length=36), nullable=False),
        sa.Column("learner", sa.String(length=128), nullable=False),
        sa.Column("lesson", sa.String(length=64), nullable=False),
        sa.Column("checkpoint", sa.String(length=64), nullable=True),
        sa.Column("event", sa.String(length=64), nullable=False),
        sa.Column("instance_id", sa.String(length=128), nullable=True),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("occurred_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("stored_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("content_hash", sa.String(length=64), nullable=False),
        sa.ForeignKeyConstraint(
            ["platform_id"], ["platforms.id"], name=op.f("fk_events_platform_id_platforms"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_events")),
        sa.UniqueConstraint("platform_id", "event_id", name=op.f("uq_events_platform_id_event_id")),
    )
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.create_index("ix_events_platform_learner", ["platform_id", "learner", "id"], unique=False)
        batch_op.create_index(
            "ix_events_platform_lesson_kind", ["platform_id", "lesson", "event", "occurred_at"], unique=False
        )
        batch_op.create_index(
            "ix_events_platform_lesson_learner", ["platform_id", "lesson", "learner", "occurred_at"], unique=False
        )
        batch_op.create_index("ix_events_platform_occurred", ["platform_id", "occurred_at"], unique=False)
        batch_op.create_index("ix_events_platform_stored", ["platform_id", "stored_at", "id"], unique=False)

    op.create_table(
        "exercise_checks",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False),
        sa.Column("platform_id", sa.Integer(), nullable=False),
        sa.Column("learner", sa.String(length=128), nullable=True),
        sa.Column("lesson", sa.String(length=64), nullable=False),
        sa.Column("case", sa.JSON(), nullable=False),
        sa.Column("correct", sa.Boolean(), nullable=False),
        sa.Column("max_abs_error", sa.Float(), nullable=True),
        sa.Column("diagnosis", sa.String(length=255), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["platform_id"], ["platforms.id"], name=op.f("fk_exercise_checks_platform_id_platforms"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_exercise_checks")),
    )
    with op.batch_alter_table("exercise_checks", schema=None) as batch_op:
        batch_op.create_index(
            "ix_exercise_checks_platform_diagnosis", ["platform_id", "diagnosis", "created_at"], unique=False
        )

    op.create_table(
        "learner_lessons",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False),
        sa.Column("platform_id", sa.Integer(), nullable=False),
        sa.Column("lesson", sa.String(length=64), nullable=False),
        sa.Column("learner", sa.String(length=128), nullable=False),
        sa.Column("first_event_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["platform_id"], ["platforms.id"], name=op.f("fk_learner_lessons_platform_id_platforms"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_learner_lessons")),
        sa.UniqueConstraint(
            "platform_id", "lesson", "learner", name=op.f("uq_learner_lessons_platform_id_lesson_learner")
        ),
    )
    op.create_table(
        "xapi_forwarding",
        sa.Column("platform_id", sa.Integer(), nullable=False),
        sa.Column("endpoint", sa.String(length=512), nullable=False),
        sa.Column("username", sa.String(length=255), nullable=False),
        sa.Column("password", sa.String(length=255), nullable=False),
        sa.Column("last_stored_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_event_row", sa.BigInteger(), nullable=False),
        sa.Column("sent", sa.BigInteger(), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.String(length=1024), nullable=True),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["platform_id"], ["platforms.id"], name=op.f("fk_xapi_forwarding_platform_id_platforms"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("platform_id", name=op.f("pk_xapi_forwarding")),
    )


def downgrade() -> None:

    op.drop_table("xapi_forwarding")
    op.drop_table("learner_lessons")
    with op.batch_alter_table("exercise_checks", schema=None) as batch_op:
        batch_op.drop_index("ix_exercise_checks_platform_diagnosis")

    op.drop_table("exercise_checks")
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.drop_index("ix_events_platform_stored")
        batch_op.drop_index("ix_events_platform_occurred")
        batch_op.drop_index("ix_events_platform_lesson_learner")
        batch_op.drop_index("ix_events_platform_lesson_kind")
        batch_op.drop_index("ix_events_platform_learner")

    op.drop_table("events")
    op.drop_table("erased_events")
    with op.batch_alter_table("checkpoint_progress", schema=None) as batch_op:
        batch_op.drop_index("ix_checkpoint_progress_platform_lesson")
        batch_op.drop_index("ix_checkpoint_progress_durations")

    op.drop_table("checkpoint_progress")
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_api_keys_platform_id"))

    op.drop_table("api_keys")
    op.drop_table("platforms")
