"""Logged-out browser sessions, refused until their cookie would have expired.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from alembic import op
import sqlalchemy as sa


revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "revoked_sessions",
        sa.Column("sid", sa.String(length=32), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("sid", name=op.f("pk_revoked_sessions")),
    )
    with op.batch_alter_table("revoked_sessions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_revoked_sessions_expires_at"), ["expires_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("revoked_sessions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_revoked_sessions_expires_at"))
    op.drop_table("revoked_sessions")
