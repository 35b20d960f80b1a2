"""ClickHouse in this process (chDB): one directory for the session, a database per test."""

import uuid

import pytest

from service.app import create_app
from service.db.clickhouse import ClickHouse
from service.db.clickhouse.schema import migrate


@pytest.fixture(scope="session")
def chdb_dir(tmp_path_factory) -> str:
    """One directory for the whole session: chDB opens one per process."""
    return str(tmp_path_factory.mktemp("chdb"))


@pytest.fixture
def ch_url(chdb_dir) -> str:
    return f"chdb://{chdb_dir}?database=t{uuid.uuid4().hex[:12]}"


@pytest.fixture
def ch_app(app_config, ch_url):
    """The same database, analytics answered by ClickHouse."""
    app = create_app({**app_config, "analytics_url": ch_url})
    yield app
    app.extensions["db"].dispose()


@pytest.fixture
def store(ch_url) -> ClickHouse:
    store = ClickHouse(ch_url)
    migrate(store)
    return store
