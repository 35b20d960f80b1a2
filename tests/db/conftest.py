"""An empty database of each backend, for tests of the schema itself."""

import uuid

import pytest
from sqlalchemy import create_engine, text

from tests.conftest import PG_URL


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_database(request, tmp_path):
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'fresh.db'}"
        return
    if not PG_URL:
        pytest.skip("PostgreSQL tests need WORKBENCH_TEST_DATABASE_URL (set by .ci/run)")
    name = f"workbench_mig_{uuid.uuid4().hex[:8]}"
    admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    yield PG_URL.rsplit("/", 1)[0] + f"/{name}"
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()
