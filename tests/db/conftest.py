"""An empty database of each backend, for tests of the schema itself.

On PostgreSQL one database per test worker serves every such test, emptied before each (its schema
dropped and made again): creating and dropping a database per test cost up to 50 s a drop, the
checkpoint PostgreSQL takes for it while other workers write."""

import pytest
from sqlalchemy import create_engine, text

from tests.conftest import PG_URL

LEFT_CONNECTED = (
    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
)


@pytest.fixture(scope="session")
def migrations_database() -> str:
    if not PG_URL:
        pytest.skip("PostgreSQL tests need WORKBENCH_TEST_DATABASE_URL (set by .ci/run)")
    name = f"{PG_URL.rsplit('/', 1)[1]}_mig"
    admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        if not conn.execute(text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}).scalar():
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return PG_URL.rsplit("/", 1)[0] + f"/{name}"


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_database(request, tmp_path):
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'fresh.db'}"
        return
    url = request.getfixturevalue("migrations_database")
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        # what a test left connected is closed first: a schema in use cannot be dropped
        conn.execute(text(LEFT_CONNECTED))
        conn.execute(text("DROP SCHEMA IF EXISTS public CASCADE"))
        conn.execute(text("CREATE SCHEMA public"))
    engine.dispose()
    yield url
