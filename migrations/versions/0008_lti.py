"""LTI 1.3: platform registrations, the tool's signing keys, launch values (state, nonces).

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "lti_registrations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("platform_id", sa.Integer(), nullable=False),
        sa.Column("issuer", sa.String(length=255), nullable=False),
        sa.Column("client_id", sa.String(length=255), nullable=False),
        sa.Column("deployment_ids", sa.JSON(), nullable=False),
        sa.Column("auth_login_url", sa.String(length=1024), nullable=False),
        sa.Column("auth_token_url", sa.String(length=1024), nullable=False),
        sa.Column("auth_audience", sa.String(length=1024), nullable=True),
        sa.Column("keyset_url", sa.String(length=1024), nullable=True),
        sa.Column("keyset", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["platform_id"],
            ["platforms.id"],
            name=op.f("fk_lti_registrations_platform_id_platforms"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_lti_registrations")),
        sa.UniqueConstraint("issuer", "client_id", name=op.f("uq_lti_registrations_issuer_client_id")),
    )
    op.create_index(op.f("ix_lti_registrations_platform_id"), "lti_registrations", ["platform_id"])
    op.create_table(
        "lti_keys",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("kid", sa.String(length=64), nullable=False),
        sa.Column("private_pem", sa.Text(), nullable=False),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.Column("published", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_lti_keys")),
        sa.UniqueConstraint("kid", name=op.f("uq_lti_keys_kid")),
    )
    op.create_table(
        "lti_values",
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("value", sa.JSON(), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_lti_values")),
    )
    op.create_index(op.f("ix_lti_values_expires_at"), "lti_values", ["expires_at"])
    op.create_table(
        "lti_grade_links",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("registration_id", sa.Integer(), nullable=False),
        sa.Column("platform_id", sa.Integer(), nullable=False),
        sa.Column("learner", sa.String(length=128), nullable=False),
        sa.Column("lesson", sa.String(length=64), nullable=False),
        sa.Column("lineitem", sa.String(length=1024), nullable=False),
        sa.Column("user_id", sa.String(length=255), nullable=False),
        sa.Column("sent", sa.Integer(), nullable=True),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_error", sa.String(length=1024), nullable=True),
        sa.ForeignKeyConstraint(
            ["registration_id"],
            ["lti_registrations.id"],
            name=op.f("fk_lti_grade_links_registration_id_lti_registrations"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["platform_id"], ["platforms.id"], name=op.f("fk_lti_grade_links_platform_id_platforms"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_lti_grade_links")),
        sa.UniqueConstraint(
            "registration_id", "lineitem", "learner", name=op.f("uq_lti_grade_links_registration_id_lineitem_learner")
        ),
    )
    op.create_index("ix_lti_grade_links_platform_learner", "lti_grade_links", ["platform_id", "learner"])


def downgrade() -> None:
    op.drop_table("lti_grade_links")
    op.drop_table("lti_values")
    op.drop_table("lti_keys")
    op.drop_table("lti_registrations")
