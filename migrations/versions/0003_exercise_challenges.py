"""Verified exercise results: challenges issued to learners, and how each test checkpoint was completed.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from alembic import op
import sqlalchemy as sa


revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "exercise_challenges",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("platform_id", sa.Integer(), nullable=False),
        sa.Column("learner", sa.String(length=128), nullable=False),
        sa.Column("lesson", sa.String(length=64), nullable=False),
        sa.Column("checkpoint", sa.String(length=64), nullable=False),
        sa.Column("cases", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("solved_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_result", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(
            ["platform_id"],
            ["platforms.id"],
            name=op.f("fk_exercise_challenges_platform_id_platforms"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_exercise_challenges")),
    )
    with op.batch_alter_table("exercise_challenges", schema=None) as batch_op:
        batch_op.create_index(
            "ix_exercise_challenges_platform_learner", ["platform_id", "learner", "created_at"], unique=False
        )
    with op.batch_alter_table("checkpoint_progress", schema=None) as batch_op:
        batch_op.add_column(sa.Column("verification", sa.String(length=16), nullable=True))
    # Every test checkpoint completed before challenges existed was self-reported.
    op.execute("UPDATE checkpoint_progress SET verification = 'reported' WHERE checkpoint = 'implement'")


def downgrade() -> None:
    with op.batch_alter_table("checkpoint_progress", schema=None) as batch_op:
        batch_op.drop_column("verification")
    with op.batch_alter_table("exercise_challenges", schema=None) as batch_op:
        batch_op.drop_index("ix_exercise_challenges_platform_learner")
    op.drop_table("exercise_challenges")
