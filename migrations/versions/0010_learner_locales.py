"""The language each learner last read the service in (issue 32): `learner_locales`, one row per
(platform, learner), for progress, exports and the dashboard's filter.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "learner_locales",
        sa.Column("platform_id", sa.Integer(), nullable=False),
        sa.Column("learner", sa.String(length=128), nullable=False),
        sa.Column("locale", sa.String(length=16), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["platform_id"], ["platforms.id"], name=op.f("fk_learner_locales_platform_id_platforms"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("platform_id", "learner", name=op.f("pk_learner_locales")),
    )


def downgrade() -> None:
    op.drop_table("learner_locales")
