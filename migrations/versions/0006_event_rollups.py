"""Event rollups: events and distinct learners per lesson, key and hour, day, week (and in
total), kept from a watermark by service/db/analytics/rollups.py; service/db/migrate.py fills them from the
events and checks already stored once the schema is at its head.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30
"""

from alembic import op
import sqlalchemy as sa


revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "event_rollups",
        sa.Column("platform_id", sa.Integer(), nullable=False),
        sa.Column("grain", sa.String(length=8), nullable=False),
        sa.Column("lesson", sa.String(length=64), nullable=False),
        sa.Column("dimension", sa.String(length=16), nullable=False),
        sa.Column("bucket", sa.String(length=19), nullable=False),
        sa.Column("key", sa.String(length=160), nullable=False),
        sa.Column("events", sa.BigInteger(), nullable=False),
        sa.Column("learners", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["platform_id"], ["platforms.id"], name=op.f("fk_event_rollups_platform_id_platforms"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint(
            "platform_id", "grain", "lesson", "dimension", "bucket", "key", name=op.f("pk_event_rollups")
        ),
    )
    op.create_table(
        "rollup_watermark",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("last_event_id", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_rollup_watermark")),
    )
    _learner_tables()
    if op.get_bind().dialect.name == "sqlite":
        # SQLite hands out max(id) + 1, so an erasure of the newest events would give their ids
        # (at or below the watermark) to new ones; AUTOINCREMENT never reuses an id.
        with op.batch_alter_table("events", recreate="always", table_kwargs={"sqlite_autoincrement": True}):
            pass
    op.create_table(
        "mistake_rollups",
        sa.Column("platform_id", sa.Integer(), nullable=False),
        sa.Column("lesson", sa.String(length=64), nullable=False),
        sa.Column("mistake", sa.String(length=64), nullable=False),
        sa.Column("checks", sa.BigInteger(), nullable=False),
        sa.Column("learners", sa.BigInteger(), nullable=False),
        platform_fk("mistake_rollups"),
        sa.PrimaryKeyConstraint("platform_id", "lesson", "mistake", name=op.f("pk_mistake_rollups")),
    )
    op.create_table(
        "mistake_learners",
        sa.Column("platform_id", sa.Integer(), nullable=False),
        sa.Column("lesson", sa.String(length=64), nullable=False),
        sa.Column("mistake", sa.String(length=64), nullable=False),
        sa.Column("learner", sa.String(length=128), nullable=False),
        platform_fk("mistake_learners"),
        sa.PrimaryKeyConstraint("platform_id", "lesson", "mistake", "learner", name=op.f("pk_mistake_learners")),
    )
    # What is already stored is rolled up by `workbench db upgrade` once the schema is at its
    # head (service/db/migrate.py): a migration imports nothing of the application.


def platform_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["platform_id"], ["platforms.id"], name=op.f(f"fk_{table}_platform_id_platforms"), ondelete="CASCADE"
    )


def _learner_tables() -> None:
    op.create_table(
        "learner_rollups",
        sa.Column("platform_id", sa.Integer(), nullable=False),
        sa.Column("lesson", sa.String(length=64), nullable=False),
        sa.Column("day", sa.String(length=19), nullable=False),
        sa.Column("state", sa.String(length=1024), nullable=False),
        sa.Column("learners", sa.BigInteger(), nullable=False),
        platform_fk("learner_rollups"),
        sa.PrimaryKeyConstraint("platform_id", "lesson", "day", "state", name=op.f("pk_learner_rollups")),
    )
    op.create_table(
        "duration_rollups",
        sa.Column("platform_id", sa.Integer(), nullable=False),
        sa.Column("lesson", sa.String(length=64), nullable=False),
        sa.Column("checkpoint", sa.String(length=64), nullable=False),
        sa.Column("seconds", sa.BigInteger(), nullable=False),
        sa.Column("learners", sa.BigInteger(), nullable=False),
        platform_fk("duration_rollups"),
        sa.PrimaryKeyConstraint("platform_id", "lesson", "checkpoint", "seconds", name=op.f("pk_duration_rollups")),
    )
    op.create_table(
        "rolled_learners",
        sa.Column("platform_id", sa.Integer(), nullable=False),
        sa.Column("lesson", sa.String(length=64), nullable=False),
        sa.Column("learner", sa.String(length=128), nullable=False),
        sa.Column("day", sa.String(length=19), nullable=False),
        sa.Column("state", sa.String(length=1024), nullable=False),
        sa.Column("durations", sa.String(length=2048), nullable=False),
        platform_fk("rolled_learners"),
        sa.PrimaryKeyConstraint("platform_id", "lesson", "learner", name=op.f("pk_rolled_learners")),
    )


def downgrade() -> None:
    for table in ("mistake_learners", "mistake_rollups", "rolled_learners", "duration_rollups", "learner_rollups"):
        op.drop_table(table)
    op.drop_table("rollup_watermark")
    op.drop_table("event_rollups")
