"""The hosts a registration's deep-linking return URLs may be on besides those of its own URLs
(issue 40: a deep-linking response goes to the registered platform only).

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("lti_registrations", schema=None) as batch_op:
        batch_op.add_column(sa.Column("return_hosts", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("lti_registrations", schema=None) as batch_op:
        batch_op.drop_column("return_hosts")
