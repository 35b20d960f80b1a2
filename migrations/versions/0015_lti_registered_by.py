"""How each LTI registration was made: by `workbench lti register` (an operator typed the
platform's URLs) or by Dynamic Registration (the platform opened an invitation; issue 52).

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("lti_registrations", schema=None) as batch_op:
        batch_op.add_column(sa.Column("registered_by", sa.String(length=16), nullable=False, server_default="command"))


def downgrade() -> None:
    with op.batch_alter_table("lti_registrations", schema=None) as batch_op:
        batch_op.drop_column("registered_by")
