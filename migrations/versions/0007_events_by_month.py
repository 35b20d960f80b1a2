"""PostgreSQL: the event log partitioned by month of `stored_at`, with a BRIN index on time.

A unique constraint on a partitioned table must include the partition key, and an event id
must stay unique across months, so `(platform_id, event_id)` moves to its own table,
`event_ids` (with the content hash a replay is compared with). `workbench_record_events`
claims ids there and inserts the events in the same statement: still one round trip.
Existing rows are copied into their months; `events_default` takes what no month holds;
service/db/partitions.py makes months ahead and applies retention. SQLite is unchanged.

The migration carries the function's whole text (Alembic's replaceable objects: each revision
holds its own version, and imports nothing of the application).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-30
"""

import datetime as dt

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

COLUMNS = (
    "id, platform_id, event_id, learner, lesson, checkpoint, event, instance_id, data, occurred_at, stored_at, "
    "content_hash"
)
INDEXES = {
    "ix_events_platform_learner": "platform_id, learner, id",
    "ix_events_platform_lesson_learner": "platform_id, lesson, learner, occurred_at",
    "ix_events_platform_stored": "platform_id, stored_at, id",
    "ix_events_platform_lesson_kind": "platform_id, lesson, event, occurred_at",
    "ix_events_platform_occurred": "platform_id, occurred_at",
}
MONTHS_AHEAD = 3  # as service/db/partitions.AHEAD at the time of this revision

# 0005's function, with event ids claimed in event_ids (the API refuses a batch naming one id
# twice); the events inserted are the ones whose ids were claimed, in batch order.
# The stored function: version 0005's with these edits, in order (migrations/stored.py).
FUNCTION_EDITS = (
    "0005",
    [
        (
            r"""    WITH ins AS (
""",
            r"""    WITH claimed AS (
        INSERT INTO event_ids (platform_id, event_id, content_hash)
        SELECT p_platform, b.event_id, b.content_hash
        FROM unnest(v_batch) b
        WHERE NOT EXISTS (
            SELECT 1 FROM erased_events t WHERE t.platform_id = p_platform AND t.event_hash = b.tombstone)
        ORDER BY b.ord
        ON CONFLICT (platform_id, event_id) DO NOTHING
        RETURNING event_id
    ), ins AS (
""",
        ),
        (
            r"""        WHERE NOT EXISTS (
            SELECT 1 FROM erased_events t WHERE t.platform_id = p_platform AND t.event_hash = b.tombstone)
        ORDER BY b.ord
        ON CONFLICT (platform_id, event_id) DO NOTHING
        RETURNING event_id
    )
""",
            r"""        WHERE b.event_id IN (SELECT event_id FROM claimed)
        ORDER BY b.ord
        ON CONFLICT (platform_id, event_id) DO NOTHING
        RETURNING event_id
    )
""",
        ),
        (
            r"""        ON CONFLICT (platform_id, event_id) DO NOTHING
        RETURNING event_id
    )
""",
            r"""        RETURNING event_id
    )
""",
        ),
        (
            r"""            LEFT JOIN events s ON s.platform_id = p_platform AND s.event_id = b.event_id
""",
            r"""            LEFT JOIN event_ids s ON s.platform_id = p_platform AND s.event_id = b.event_id
""",
        ),
    ],
)


def _add_months(month: dt.date, n: int) -> dt.date:
    index = month.year * 12 + month.month - 1 + n
    return dt.date(index // 12, index % 12 + 1, 1)


def _month_of(at: dt.datetime) -> dt.date:
    at = at.astimezone(dt.UTC)
    return dt.date(at.year, at.month, 1)


def _make_months(first: dt.date, last: dt.date) -> None:
    """A partition per month from `first` to `last` (each [first day, next month's first day) in UTC)."""
    month = first
    while month <= last:
        following = _add_months(month, 1)
        op.execute(
            f"CREATE TABLE events_{month:%Y_%m} PARTITION OF events "
            f"FOR VALUES FROM ('{month.isoformat()} 00:00:00+00') TO ('{following.isoformat()} 00:00:00+00')"
        )
        month = following


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.create_table(
        "event_ids",
        sa.Column("platform_id", sa.Integer(), nullable=False),
        sa.Column("event_id", sa.String(length=36), nullable=False),
        sa.Column("content_hash", sa.String(length=64), nullable=False),
        sa.ForeignKeyConstraint(
            ["platform_id"], ["platforms.id"], name="fk_event_ids_platform_id_platforms", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("platform_id", "event_id", name="pk_event_ids"),
    )
    op.execute(
        "INSERT INTO event_ids (platform_id, event_id, content_hash) SELECT platform_id, event_id, content_hash FROM events"
    )
    op.execute("ALTER TABLE events RENAME TO events_0006")
    op.execute("ALTER SEQUENCE events_id_seq OWNED BY NONE")
    op.execute(
        """
        CREATE TABLE events (
            id bigint NOT NULL DEFAULT nextval('events_id_seq'),
            platform_id integer NOT NULL,
            event_id varchar(36) NOT NULL,
            learner varchar(128) NOT NULL,
            lesson varchar(64) NOT NULL,
            checkpoint varchar(64),
            event varchar(64) NOT NULL,
            instance_id varchar(128),
            data json NOT NULL,
            occurred_at timestamptz NOT NULL,
            stored_at timestamptz NOT NULL,
            content_hash varchar(64) NOT NULL
        ) PARTITION BY RANGE (stored_at)
        """
    )
    op.execute("CREATE TABLE events_default PARTITION OF events DEFAULT")
    oldest = op.get_bind().execute(sa.text("SELECT min(stored_at) FROM events_0006")).scalar()
    current = _month_of(dt.datetime.now(dt.UTC))
    first = min(current, _month_of(oldest)) if oldest else current
    _make_months(first, _add_months(current, MONTHS_AHEAD))
    op.execute(f"INSERT INTO events ({COLUMNS}) SELECT {COLUMNS} FROM events_0006")
    op.execute("DROP TABLE events_0006")
    _keys_and_indexes()
    op.execute(stored_version("0007"))


def _keys_and_indexes() -> None:
    op.execute("ALTER SEQUENCE events_id_seq OWNED BY events.id")
    op.execute("ALTER TABLE events ADD CONSTRAINT pk_events PRIMARY KEY (id, stored_at)")
    op.execute(
        "ALTER TABLE events ADD CONSTRAINT fk_events_platform_id_platforms FOREIGN KEY (platform_id) "
        "REFERENCES platforms (id) ON DELETE CASCADE"
    )
    for name, columns in INDEXES.items():
        op.execute(f"CREATE INDEX {name} ON events ({columns})")
    op.execute("CREATE INDEX ix_events_stored_brin ON events USING brin (stored_at)")
    op.execute("CREATE INDEX ix_events_occurred_brin ON events USING brin (occurred_at)")
    op.execute("ANALYZE events")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(stored_version("0005"))
    op.execute("ALTER TABLE events RENAME TO events_0007")
    op.execute("ALTER SEQUENCE events_id_seq OWNED BY NONE")
    op.execute("CREATE TABLE events (LIKE events_0007 INCLUDING DEFAULTS)")
    op.execute(f"INSERT INTO events ({COLUMNS}) SELECT {COLUMNS} FROM events_0007")
    op.execute("DROP TABLE events_0007")  # and its partitions
    op.execute("ALTER SEQUENCE events_id_seq OWNED BY events.id")
    op.execute("ALTER TABLE events ADD CONSTRAINT pk_events PRIMARY KEY (id)")
    op.execute("ALTER TABLE events ADD CONSTRAINT uq_events_platform_id_event_id UNIQUE (platform_id, event_id)")
    op.execute(
        "ALTER TABLE events ADD CONSTRAINT fk_events_platform_id_platforms FOREIGN KEY (platform_id) "
        "REFERENCES platforms (id) ON DELETE CASCADE"
    )
    for name, columns in INDEXES.items():
        op.execute(f"CREATE INDEX {name} ON events ({columns})")
    op.drop_table("event_ids")


def stored_version(revision: str) -> str:
    from stored import version  # migrations/stored.py, on the path when the migrations run (env.py)

    return version(revision)
