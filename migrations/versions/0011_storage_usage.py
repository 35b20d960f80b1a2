"""Storage quotas (issue 40): `storage_usage`, the events and bytes each learner, browser session
and platform stored per quota window (service/db/quotas.py); and `write_probe`, where /readyz
writes (and deletes) a page-sized row to learn whether the database takes writes.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "storage_usage",
        sa.Column("subject", sa.String(length=200), nullable=False),
        sa.Column("window_seconds", sa.Integer(), nullable=False),
        sa.Column("window_start", sa.BigInteger(), nullable=False),
        sa.Column("events", sa.BigInteger(), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("subject", "window_seconds", "window_start", name=op.f("pk_storage_usage")),
    )
    op.create_table(
        "write_probe",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("filler", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_write_probe")),
    )


def downgrade() -> None:
    op.drop_table("write_probe")
    op.drop_table("storage_usage")
