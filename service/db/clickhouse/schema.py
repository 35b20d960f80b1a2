"""The analytics store's tables, ClickHouse's own: MergeTree ordered platform first, replacing
rows by their key so that a copy made twice (a sync run again, or crashed mid-batch and run
again) leaves each row once. Reads use FINAL. `migrate` creates them and records the version;
a later version adds its statements to `MIGRATIONS`, never edits one."""

from __future__ import annotations

from ..analytics.rollups import NAME_CAP  # as the SQL rollups: a longer name counts as none
from .connection import ClickHouse

DATETIME = "DateTime64(6, 'UTC')"


def _string(field: str) -> str:
    """data[field] when it is a string of at most NAME_CAP characters, else NULL."""
    value = f"JSONExtractString(data, '{field}')"
    return f"if(JSONType(data, '{field}') = 'String' AND lengthUTF8({value}) <= {NAME_CAP}, {value}, NULL)"


def _count(field: str) -> str:
    """data[field] as text when it is a whole number from 0 to 999,999, else NULL."""
    value = f"JSONExtractInt(data, '{field}')"
    whole = f"JSONType(data, '{field}') IN ('Int64', 'UInt64') AND {value} BETWEEN 0 AND 999999"
    return f"if({whole}, toString({value}), NULL)"


def _keyed(value: str) -> str:
    return f"ifNull(concat('=', {value}), '-')"


_CELL = f"concat({_count('token')}, ',', {_count('dimension')})"
_EDIT = "event = 'parameter-changed'"
# (dimension, key, whether the event counts in it): rollups.py's `key_of` and `_only`.
_DIMENSIONS = ", ".join(
    f"('{name}', {key}, toUInt8({counts}))"
    for name, key, counts in (
        ("event", "concat('=', toString(event))", "1"),
        ("checkpoint", _keyed("checkpoint"), "1"),
        ("parameter", _keyed(_string("parameter")), _EDIT),
        ("manipulation", _keyed(_string("manipulation")), f"{_EDIT} AND {_string('manipulation')} IS NOT NULL"),
        ("cell", _keyed(_CELL), f"{_EDIT} AND {_string('parameter')} = 'token' AND {_CELL} IS NOT NULL"),
    )
)


def counted(source: str = "{db}.events", where: str = "") -> str:
    """What `event_counts` holds, counted from `source` (the view's inserted rows, or the log)."""
    return f"""SELECT platform_id, d.1 AS dimension, lesson, toStartOfHour(occurred_at) AS hour, d.2 AS key,
        count() AS events, uniqExactState(learner) AS learners
        FROM {source} ARRAY JOIN arrayFilter(x -> x.3 = 1, [{_DIMENSIONS}]) AS d {where}
        GROUP BY platform_id, dimension, lesson, hour, key"""


MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        "CREATE DATABASE IF NOT EXISTS {db}",
        "CREATE TABLE IF NOT EXISTS {db}.schema_versions (version UInt32, applied_at DateTime64(6, 'UTC'))"
        " ENGINE = MergeTree ORDER BY version",
        # The event log: one row per stored event, keyed by platform and the primary database's
        # row id (each sync batch is a new id range: FINAL has no overlapping parts to merge). What
        # the reads group by is taken out of `data` once, as it is written (MATERIALIZED).
        f"""CREATE TABLE IF NOT EXISTS {{db}}.events (
            platform_id UInt32, id UInt64, event_id String, learner String,
            lesson LowCardinality(String), checkpoint Nullable(String), event LowCardinality(String),
            instance_id Nullable(String), item Nullable(String), data String,
            occurred_at {DATETIME}, stored_at {DATETIME}, content_hash String,
            parameter LowCardinality(Nullable(String)) MATERIALIZED {_string("parameter")},
            manipulation LowCardinality(Nullable(String)) MATERIALIZED {_string("manipulation")},
            cell Nullable(String) MATERIALIZED concat({_count("token")}, ',', {_count("dimension")}),
            phase LowCardinality(Nullable(String)) MATERIALIZED {_string("phase")},
            response Nullable(String) MATERIALIZED if(JSONHas(data, 'response')
                AND JSONType(data, 'response') != 'Null', JSONExtractRaw(data, 'response'), NULL),
            correct UInt8 MATERIALIZED JSONExtractBool(data, 'correct')
        ) ENGINE = ReplacingMergeTree ORDER BY (platform_id, id)
          SETTINGS non_replicated_deduplication_window = 1000""",
        # Events and distinct learners per platform, lesson, hour and key of each dimension (the
        # SQL rollups' keys: '=' and the value, or '-'), kept by the view as events arrive; a
        # batch inserted again under its token is skipped here too. Erasure rebuilds a
        # platform's rows from the events (sync.py).
        """CREATE TABLE IF NOT EXISTS {db}.event_counts (
            platform_id UInt32, dimension LowCardinality(String), lesson LowCardinality(String),
            hour DateTime('UTC'), key String,
            events SimpleAggregateFunction(sum, UInt64), learners AggregateFunction(uniqExact, String)
        ) ENGINE = AggregatingMergeTree ORDER BY (platform_id, dimension, lesson, hour, key)
          SETTINGS non_replicated_deduplication_window = 1000""",
        f"CREATE MATERIALIZED VIEW IF NOT EXISTS {{db}}.event_counts_view TO {{db}}.event_counts AS {counted()}",
        # What ingest derives per learner (progress and first events), copied for the learners a
        # sync batch touched; `version` is the batch's last event id, so the newest copy wins.
        f"""CREATE TABLE IF NOT EXISTS {{db}}.learner_lessons (
            platform_id UInt32, lesson LowCardinality(String), learner String,
            first_event_at {DATETIME}, version UInt64
        ) ENGINE = ReplacingMergeTree(version) ORDER BY (platform_id, lesson, learner)""",
        f"""CREATE TABLE IF NOT EXISTS {{db}}.checkpoint_progress (
            platform_id UInt32, lesson LowCardinality(String), learner String,
            checkpoint LowCardinality(String), completed_at {DATETIME},
            seconds_from_start Nullable(Float64), verification Nullable(String), version UInt64
        ) ENGINE = ReplacingMergeTree(version) ORDER BY (platform_id, lesson, learner, checkpoint)""",
        f"""CREATE TABLE IF NOT EXISTS {{db}}.learner_locales (
            platform_id UInt32, learner String, locale LowCardinality(String), updated_at {DATETIME}
        ) ENGINE = ReplacingMergeTree(updated_at) ORDER BY (platform_id, learner)""",
        f"""CREATE TABLE IF NOT EXISTS {{db}}.exercise_checks (
            platform_id UInt32, id UInt64, learner Nullable(String), lesson LowCardinality(String),
            diagnosis Nullable(String), created_at {DATETIME}
        ) ENGINE = ReplacingMergeTree ORDER BY (platform_id, lesson, id)""",
        # The item statistics' sums per platform and lesson, copied whole at each sync that saw
        # answers (a key whose learners fall to 0 is written as zeros): sync.py says why.
        """CREATE TABLE IF NOT EXISTS {db}.item_sums (
            platform_id UInt32, lesson LowCardinality(String), dimension LowCardinality(String), key String,
            learners Int64, sx Int64, sy Int64, sxy Int64, syy Int64, version UInt64
        ) ENGINE = ReplacingMergeTree(version) ORDER BY (platform_id, lesson, dimension, key)""",
        # How far the sync has copied, per source: the newest row wins.
        f"""CREATE TABLE IF NOT EXISTS {{db}}.sync_marks (
            source LowCardinality(String), mark Int64, at {DATETIME}
        ) ENGINE = ReplacingMergeTree(at) ORDER BY source""",
    ),
)

TABLES = ("events", "learner_lessons", "checkpoint_progress", "learner_locales", "exercise_checks")  # with a learner


def version(ch: ClickHouse) -> int:
    """The schema version applied (0 before the first migration)."""
    found = ch.rows(
        "SELECT count() FROM system.tables WHERE database = {name:String} AND name = 'schema_versions'",
        name=ch.database,
    )
    if not found[0][0]:
        return 0
    return int(ch.rows("SELECT max(version) FROM {db}.schema_versions")[0][0] or 0)


def migrate(ch: ClickHouse) -> list[int]:
    """Apply the versions not applied yet, in order; which were applied."""
    done, applied = version(ch), []
    for number, statements in enumerate(MIGRATIONS, start=1):
        if number <= done:
            continue
        for statement in statements:
            ch.command(statement)
        ch.command("INSERT INTO {db}.schema_versions VALUES ({v:UInt32}, now64(6))", v=number)
        applied.append(number)
    return applied
