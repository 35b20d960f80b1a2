"""PostgreSQL: recording events is one function call, so one round trip per request.

`workbench_record_events(platform, events json, now)` (events as `workbench_event_in` rows)
does what `service/db/events/sqlite.py` does on SQLite, in one statement: skip tombstoned ids,
insert the rest once, refuse the whole call on a conflicting replay (SQLSTATE WB409, the ids in the message), keep each learner's first
event per lesson (moving their durations when an earlier event arrives), and record each
checkpoint's earliest completion. Python still decides which checkpoint an event completes
(the lesson's rules) and sends it as `completes`; ids are ordered byte-wise (COLLATE "C") as
Python orders them, so every writer takes locks in one order.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


EVENT_TYPE = """
CREATE TYPE workbench_event_in AS (
    ord bigint, event_id text, learner text, lesson text, checkpoint text, event text, instance_id text,
    data json, occurred_at timestamptz, content_hash text, tombstone text, completes text, verification text
)
"""

FUNCTION = r"""
CREATE OR REPLACE FUNCTION workbench_record_events(p_platform bigint, p_events json, p_now timestamptz)
RETURNS json
LANGUAGE plpgsql
AS $fn$
DECLARE
    v_batch workbench_event_in[];
    v_new workbench_event_in[];
    v_erased text[];
    v_inserted text[];
    v_others text[];
    v_conflicts text[];
BEGIN
    v_batch := ARRAY(SELECT r FROM json_populate_recordset(NULL::workbench_event_in, p_events) r ORDER BY r.ord);

    WITH ins AS (
        INSERT INTO events (platform_id, event_id, learner, lesson, checkpoint, event, instance_id, data,
                            occurred_at, stored_at, content_hash)
        SELECT p_platform, b.event_id, b.learner, b.lesson, b.checkpoint, b.event, b.instance_id, b.data,
               b.occurred_at, p_now, b.content_hash
        FROM unnest(v_batch) b
        WHERE NOT EXISTS (
            SELECT 1 FROM erased_events t WHERE t.platform_id = p_platform AND t.event_hash = b.tombstone)
        ORDER BY b.ord
        ON CONFLICT (platform_id, event_id) DO NOTHING
        RETURNING event_id
    )
    SELECT coalesce(array_agg(event_id), '{}') INTO v_inserted FROM ins;

    IF cardinality(v_inserted) = cardinality(v_batch) THEN
        v_new := v_batch;
        v_others := '{}';
        v_erased := '{}';
    ELSE  -- tombstoned, replayed or conflicting ids: read what is stored
        v_new := ARRAY(
            SELECT b FROM unnest(v_batch) b JOIN unnest(v_inserted) i(id) ON i.id = b.event_id ORDER BY b.ord);
        v_erased := ARRAY(
            SELECT b.event_id FROM unnest(v_batch) b
            JOIN erased_events t ON t.platform_id = p_platform AND t.event_hash = b.tombstone
            ORDER BY b.ord);
        v_others := ARRAY(
            SELECT b.event_id FROM unnest(v_batch) b
            WHERE NOT EXISTS (SELECT 1 FROM unnest(v_inserted) i(id) WHERE i.id = b.event_id)
              AND NOT EXISTS (SELECT 1 FROM unnest(v_erased) x(id) WHERE x.id = b.event_id)
            ORDER BY b.ord);
        v_conflicts := ARRAY(
            SELECT b.event_id FROM unnest(v_batch) b
            JOIN unnest(v_others) o(id) ON o.id = b.event_id
            LEFT JOIN events s ON s.platform_id = p_platform AND s.event_id = b.event_id
            WHERE s.content_hash IS DISTINCT FROM b.content_hash
            ORDER BY b.event_id COLLATE "C");
        IF cardinality(v_conflicts) > 0 THEN
            RAISE EXCEPTION USING ERRCODE = 'WB409', MESSAGE = array_to_json(v_conflicts)::text;
        END IF;
    END IF;

    IF cardinality(v_new) > 0 THEN
        -- each learner's first event per lesson; an earlier one moves their start and their
        -- durations with it (the upsert returns only rows it inserted or moved)
        WITH moved AS (
            INSERT INTO learner_lessons (platform_id, lesson, learner, first_event_at)
            SELECT p_platform, b.lesson, b.learner, min(b.occurred_at)
            FROM unnest(v_new) b
            GROUP BY b.lesson, b.learner
            ORDER BY b.lesson COLLATE "C", b.learner COLLATE "C"
            ON CONFLICT (platform_id, lesson, learner) DO UPDATE
                SET first_event_at = excluded.first_event_at
                WHERE excluded.first_event_at < learner_lessons.first_event_at
            RETURNING lesson, learner, first_event_at
        )
        UPDATE checkpoint_progress p
        SET seconds_from_start = extract(epoch FROM p.completed_at - m.first_event_at)::float8
        FROM moved m
        WHERE p.platform_id = p_platform AND p.learner = m.learner AND p.lesson = m.lesson;

        -- the earliest completion wins
        IF EXISTS (SELECT 1 FROM unnest(v_new) b WHERE b.completes IS NOT NULL) THEN
        INSERT INTO checkpoint_progress (platform_id, learner, lesson, checkpoint, completed_at, event_id,
                                         seconds_from_start, verification)
        SELECT p_platform, c.learner, c.lesson, c.completes, c.occurred_at, c.event_id,
               extract(epoch FROM c.occurred_at - (
                   SELECT l.first_event_at FROM learner_lessons l
                   WHERE l.platform_id = p_platform AND l.lesson = c.lesson AND l.learner = c.learner))::float8,
               c.verification
        FROM (
            SELECT DISTINCT ON (b.learner, b.lesson, b.completes) b.*
            FROM unnest(v_new) b
            WHERE b.completes IS NOT NULL
            ORDER BY b.learner, b.lesson, b.completes, b.occurred_at, b.event_id COLLATE "C"
        ) c
        ORDER BY c.learner COLLATE "C", c.lesson COLLATE "C", c.completes COLLATE "C"
        ON CONFLICT (platform_id, learner, lesson, checkpoint) DO UPDATE SET
            completed_at = CASE WHEN excluded.completed_at < checkpoint_progress.completed_at
                           THEN excluded.completed_at ELSE checkpoint_progress.completed_at END,
            event_id = CASE WHEN excluded.completed_at < checkpoint_progress.completed_at
                       THEN excluded.event_id ELSE checkpoint_progress.event_id END,
            seconds_from_start = CASE WHEN excluded.completed_at < checkpoint_progress.completed_at
                                 THEN excluded.seconds_from_start ELSE checkpoint_progress.seconds_from_start END,
            verification = CASE WHEN excluded.completed_at < checkpoint_progress.completed_at
                           THEN excluded.verification ELSE checkpoint_progress.verification END;
        END IF;
    END IF;

    RETURN json_build_object('created', v_inserted, 'replayed', v_others, 'erased', v_erased);
END
$fn$;
"""


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(EVENT_TYPE)
        op.execute(FUNCTION)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP FUNCTION workbench_record_events(bigint, json, timestamptz)")
        op.execute("DROP TYPE workbench_event_in")
