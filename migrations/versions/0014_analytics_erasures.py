"""The analytics store (issue 43): `analytics_erasures`, learners erased here whose rows the sync
has still to delete from ClickHouse (written only when WORKBENCH_ANALYTICS_URL is set; the sync
deletes each row once the store has forgotten the learner).

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "analytics_erasures",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False),
        sa.Column("platform_id", sa.Integer(), nullable=False),
        sa.Column("learner", sa.String(length=128), nullable=False),
        sa.Column("requested_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["platform_id"], ["platforms.id"], name=op.f("fk_analytics_erasures_platform_id_platforms"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_analytics_erasures")),
    )


def downgrade() -> None:
    op.drop_table("analytics_erasures")
