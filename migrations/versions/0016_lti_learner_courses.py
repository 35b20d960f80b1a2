"""The course each launched learner opened a lesson from, named by the lesson's xAPI statements as
their parent activity, as Open edX Aspects reads them (issue 52).

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "lti_learner_courses",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("platform_id", sa.Integer(), nullable=False),
        sa.Column("learner", sa.String(length=128), nullable=False),
        sa.Column("lesson", sa.String(length=64), nullable=False),
        sa.Column("registration_id", sa.Integer(), nullable=False),
        sa.Column("course", sa.String(length=255), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["platform_id"], ["platforms.id"], name=op.f("fk_lti_learner_courses_platform_id_platforms"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["registration_id"], ["lti_registrations.id"],
            name=op.f("fk_lti_learner_courses_registration_id_lti_registrations"), ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_lti_learner_courses")),
        sa.UniqueConstraint("platform_id", "learner", "lesson", name=op.f("uq_lti_learner_courses_platform_id_learner_lesson")),
    )  # fmt: skip


def downgrade() -> None:
    op.drop_table("lti_learner_courses")
