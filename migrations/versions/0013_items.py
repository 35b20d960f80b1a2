"""Items (issue 42): an answered event names the lesson's item it answers (`events.item`), and
the item statistics come from rollups: each learner's latest answers (`rolled_answers`) and what
they add to the per-lesson sums (`item_rollups`). PostgreSQL's `workbench_record_events` gains
the item (its edits of 0009's version below, migrations/stored.py); the downgrade restores 0009's.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

# The stored function: version 0009's with these edits, in order (migrations/stored.py).
FUNCTION_EDITS = (
    "0009",
    [
        (
            r"""        INSERT INTO events (platform_id, event_id, learner, lesson, checkpoint, event, instance_id, data,
""",
            r"""        INSERT INTO events (platform_id, event_id, learner, lesson, checkpoint, event, instance_id, item, data,
""",
        ),
        (
            r"""        SELECT p_platform, b.event_id, b.learner, b.lesson, b.checkpoint, b.event, b.instance_id, b.data,
""",
            r"""        SELECT p_platform, b.event_id, b.learner, b.lesson, b.checkpoint, b.event, b.instance_id, b.item, b.data,
""",
        ),
    ],
)


def upgrade() -> None:
    op.add_column("events", sa.Column("item", sa.String(length=64), nullable=True))
    op.create_table(
        "rolled_answers",
        sa.Column("platform_id", sa.Integer(), nullable=False),
        sa.Column("lesson", sa.String(length=64), nullable=False),
        sa.Column("learner", sa.String(length=128), nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["platform_id"], ["platforms.id"], name=op.f("fk_rolled_answers_platform_id_platforms"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("platform_id", "lesson", "learner", name=op.f("pk_rolled_answers")),
    )
    op.create_table(
        "item_rollups",
        sa.Column("platform_id", sa.Integer(), nullable=False),
        sa.Column("lesson", sa.String(length=64), nullable=False),
        sa.Column("dimension", sa.String(length=8), nullable=False),
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("learners", sa.BigInteger(), nullable=False),
        sa.Column("sx", sa.BigInteger(), nullable=False),
        sa.Column("sy", sa.BigInteger(), nullable=False),
        sa.Column("sxy", sa.BigInteger(), nullable=False),
        sa.Column("syy", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["platform_id"], ["platforms.id"], name=op.f("fk_item_rollups_platform_id_platforms"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("platform_id", "lesson", "dimension", "key", name=op.f("pk_item_rollups")),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TYPE workbench_event_in ADD ATTRIBUTE item text")
        op.execute(stored_version("0013"))


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(stored_version("0009"))
        op.execute("ALTER TYPE workbench_event_in DROP ATTRIBUTE item")
    op.drop_table("item_rollups")
    op.drop_table("rolled_answers")
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.drop_column("item")


def stored_version(revision: str) -> str:
    from stored import version  # migrations/stored.py, on the path when the migrations run (env.py)

    return version(revision)
