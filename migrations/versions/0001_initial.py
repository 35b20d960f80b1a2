"""Initial revision: the schema's starting point (tables arrive with the data revisions).

Empty on purpose and kept: databases stamped at 0001 exist, and Alembic needs every revision
of their history to upgrade them.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
