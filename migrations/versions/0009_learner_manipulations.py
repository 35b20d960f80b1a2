"""Checkpoints completed by a set of manipulations (the workbench's four): each learner's earliest
report of each manipulation, and PostgreSQL's `workbench_record_events` recording them and the
completion they make.

A checkpoint that lists `manipulations` in its lesson completes when every one has been reported
(`data.manipulation` of its events), at the moment the last of them was first done; replays and
repeats count once. The event rows gain `advances` (the checkpoint), `manipulation` and
`required` (the lesson's list, comma-joined). The function is 0007's with the edits below
(migrations/stored.py); the downgrade restores 0007's.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

# The stored function: version 0007's with these edits, in order (migrations/stored.py).
FUNCTION_EDITS = (
    "0007",
    [
        (
            r"""    v_conflicts text[];
BEGIN
""",
            r"""    v_conflicts text[];
    v_whole json := '[]';
BEGIN
""",
        ),
        (
            r"""        -- the earliest completion wins
        IF EXISTS (SELECT 1 FROM unnest(v_new) b WHERE b.completes IS NOT NULL) THEN
""",
            r"""        -- each manipulation's earliest report (checkpoints completed by a set of manipulations)
        IF EXISTS (SELECT 1 FROM unnest(v_new) b WHERE b.manipulation IS NOT NULL) THEN
        INSERT INTO learner_manipulations (platform_id, learner, lesson, checkpoint, manipulation, done_at, event_id)
        SELECT p_platform, m.learner, m.lesson, m.advances, m.manipulation, m.occurred_at, m.event_id
        FROM (
            SELECT DISTINCT ON (b.learner, b.lesson, b.advances, b.manipulation) b.*
            FROM unnest(v_new) b
            WHERE b.manipulation IS NOT NULL
            ORDER BY b.learner, b.lesson, b.advances, b.manipulation, b.occurred_at, b.event_id COLLATE "C"
        ) m
        ORDER BY m.learner COLLATE "C", m.lesson COLLATE "C", m.advances COLLATE "C", m.manipulation COLLATE "C"
        ON CONFLICT (platform_id, learner, lesson, checkpoint, manipulation) DO UPDATE
            SET done_at = excluded.done_at, event_id = excluded.event_id
            WHERE excluded.done_at < learner_manipulations.done_at;
        END IF;

        -- the earliest completion wins: of one completing event, or of a whole set of
        -- manipulations (when the last of them was first done)
        IF EXISTS (SELECT 1 FROM unnest(v_new) b WHERE b.completes IS NOT NULL OR b.manipulation IS NOT NULL) THEN
        WITH direct AS (
            SELECT DISTINCT ON (b.learner, b.lesson, b.completes)
                   b.learner, b.lesson, b.completes AS checkpoint, b.occurred_at AS at, b.event_id, b.verification
            FROM unnest(v_new) b
            WHERE b.completes IS NOT NULL
            ORDER BY b.learner, b.lesson, b.completes, b.occurred_at, b.event_id COLLATE "C"
        ), touched AS (
            SELECT DISTINCT b.learner, b.lesson, b.advances, b.required
            FROM unnest(v_new) b
            WHERE b.manipulation IS NOT NULL
        ), whole AS (
            SELECT t.learner, t.lesson, t.advances AS checkpoint, s.done_at AS at, s.event_id, NULL::text AS verification
            FROM touched t
            CROSS JOIN LATERAL (
                SELECT count(*) AS n, max(m.done_at) AS done_at,
                       (array_agg(m.event_id ORDER BY m.done_at DESC, m.event_id COLLATE "C" DESC))[1] AS event_id
                FROM learner_manipulations m
                WHERE m.platform_id = p_platform AND m.learner = t.learner AND m.lesson = t.lesson
                  AND m.checkpoint = t.advances AND m.manipulation = ANY (string_to_array(t.required, ','))
            ) s
            WHERE s.n = cardinality(string_to_array(t.required, ','))
        ), progress AS (
""",
        ),
        (
            r"""        SELECT p_platform, c.learner, c.lesson, c.completes, c.occurred_at, c.event_id,
               extract(epoch FROM c.occurred_at - (
""",
            r"""        SELECT p_platform, c.learner, c.lesson, c.checkpoint, c.at, c.event_id,
               extract(epoch FROM c.at - (
""",
        ),
        (
            r"""        FROM (
            SELECT DISTINCT ON (b.learner, b.lesson, b.completes) b.*
            FROM unnest(v_new) b
            WHERE b.completes IS NOT NULL
            ORDER BY b.learner, b.lesson, b.completes, b.occurred_at, b.event_id COLLATE "C"
        ) c
        ORDER BY c.learner COLLATE "C", c.lesson COLLATE "C", c.completes COLLATE "C"
""",
            r"""        FROM (SELECT * FROM direct UNION ALL SELECT * FROM whole) c
        ORDER BY c.learner COLLATE "C", c.lesson COLLATE "C", c.checkpoint COLLATE "C"
""",
        ),
        (
            r"""                           THEN excluded.verification ELSE checkpoint_progress.verification END;
""",
            r"""                           THEN excluded.verification ELSE checkpoint_progress.verification END
        RETURNING 1
        )
        SELECT coalesce(json_agg(json_build_array(w.learner, w.lesson, w.checkpoint)), '[]')
        INTO v_whole FROM whole w;
""",
        ),
        (
            r"""    RETURN json_build_object('created', v_inserted, 'replayed', v_others, 'erased', v_erased);
""",
            r"""    RETURN json_build_object('created', v_inserted, 'replayed', v_others, 'erased', v_erased, 'completed', v_whole);
""",
        ),
    ],
)


def upgrade() -> None:
    op.create_table(
        "learner_manipulations",
        sa.Column("platform_id", sa.Integer(), nullable=False),
        sa.Column("learner", sa.String(length=128), nullable=False),
        sa.Column("lesson", sa.String(length=64), nullable=False),
        sa.Column("checkpoint", sa.String(length=64), nullable=False),
        sa.Column("manipulation", sa.String(length=64), nullable=False),
        sa.Column("done_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("event_id", sa.String(length=36), nullable=False),
        sa.ForeignKeyConstraint(
            ["platform_id"],
            ["platforms.id"],
            name=op.f("fk_learner_manipulations_platform_id_platforms"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "platform_id", "learner", "lesson", "checkpoint", "manipulation", name=op.f("pk_learner_manipulations")
        ),
    )
    op.create_index(
        op.f("ix_learner_manipulations_lesson"),
        "learner_manipulations",
        ["platform_id", "lesson", "checkpoint", "manipulation"],
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "ALTER TYPE workbench_event_in ADD ATTRIBUTE advances text, ADD ATTRIBUTE manipulation text, "
            "ADD ATTRIBUTE required text"
        )
        op.execute(stored_version("0009"))


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(stored_version("0007"))
        op.execute(
            "ALTER TYPE workbench_event_in DROP ATTRIBUTE required, DROP ATTRIBUTE manipulation, "
            "DROP ATTRIBUTE advances"
        )
    op.drop_index(op.f("ix_learner_manipulations_lesson"), table_name="learner_manipulations")
    op.drop_table("learner_manipulations")


def stored_version(revision: str) -> str:
    from stored import version  # migrations/stored.py, on the path when the migrations run (env.py)

    return version(revision)
