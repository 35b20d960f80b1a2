-- PostgreSQL's workbench_record_events, as the head migration (0013) installs it; a test keeps
-- the two equal. What it does: service/db/events/__init__.py and migrations 0005, 0007, 0009, 0013.
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
    v_whole json := '[]';
BEGIN
    v_batch := ARRAY(SELECT r FROM json_populate_recordset(NULL::workbench_event_in, p_events) r ORDER BY r.ord);

    WITH claimed AS (
        INSERT INTO event_ids (platform_id, event_id, content_hash)
        SELECT p_platform, b.event_id, b.content_hash
        FROM unnest(v_batch) b
        WHERE NOT EXISTS (
            SELECT 1 FROM erased_events t WHERE t.platform_id = p_platform AND t.event_hash = b.tombstone)
        ORDER BY b.ord
        ON CONFLICT (platform_id, event_id) DO NOTHING
        RETURNING event_id
    ), ins AS (
        INSERT INTO events (platform_id, event_id, learner, lesson, checkpoint, event, instance_id, item, data,
                            occurred_at, stored_at, content_hash)
        SELECT p_platform, b.event_id, b.learner, b.lesson, b.checkpoint, b.event, b.instance_id, b.item, b.data,
               b.occurred_at, p_now, b.content_hash
        FROM unnest(v_batch) b
        WHERE b.event_id IN (SELECT event_id FROM claimed)
        ORDER BY b.ord
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
            LEFT JOIN event_ids s ON s.platform_id = p_platform AND s.event_id = b.event_id
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

        -- each manipulation's earliest report (checkpoints completed by a set of manipulations)
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
        INSERT INTO checkpoint_progress (platform_id, learner, lesson, checkpoint, completed_at, event_id,
                                         seconds_from_start, verification)
        SELECT p_platform, c.learner, c.lesson, c.checkpoint, c.at, c.event_id,
               extract(epoch FROM c.at - (
                   SELECT l.first_event_at FROM learner_lessons l
                   WHERE l.platform_id = p_platform AND l.lesson = c.lesson AND l.learner = c.learner))::float8,
               c.verification
        FROM (SELECT * FROM direct UNION ALL SELECT * FROM whole) c
        ORDER BY c.learner COLLATE "C", c.lesson COLLATE "C", c.checkpoint COLLATE "C"
        ON CONFLICT (platform_id, learner, lesson, checkpoint) DO UPDATE SET
            completed_at = CASE WHEN excluded.completed_at < checkpoint_progress.completed_at
                           THEN excluded.completed_at ELSE checkpoint_progress.completed_at END,
            event_id = CASE WHEN excluded.completed_at < checkpoint_progress.completed_at
                       THEN excluded.event_id ELSE checkpoint_progress.event_id END,
            seconds_from_start = CASE WHEN excluded.completed_at < checkpoint_progress.completed_at
                                 THEN excluded.seconds_from_start ELSE checkpoint_progress.seconds_from_start END,
            verification = CASE WHEN excluded.completed_at < checkpoint_progress.completed_at
                           THEN excluded.verification ELSE checkpoint_progress.verification END
        RETURNING 1
        )
        SELECT coalesce(json_agg(json_build_array(w.learner, w.lesson, w.checkpoint)), '[]')
        INTO v_whole FROM whole w;
        END IF;
    END IF;

    RETURN json_build_object('created', v_inserted, 'replayed', v_others, 'erased', v_erased, 'completed', v_whole);
END
$fn$;
