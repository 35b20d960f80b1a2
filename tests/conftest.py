"""Fixtures in the flaskr style: `app`, `client`, `runner`, `db`; SQLite always, PostgreSQL when
WORKBENCH_TEST_DATABASE_URL is set (each DB-backed test then runs on both).

Under pytest-xdist (`make test` runs the suite on parallel workers) each worker has what tests
must not share: its own PostgreSQL database (`test_gw1` beside `test`), its own Redis database and
its own directory of heavy-compute slots, set in the environment before any test module reads it,
so the servers the tests start inherit them too."""

from __future__ import annotations

import os
import re
import tempfile

import pytest
from sqlalchemy import create_engine, text


def _own_resources(worker: str) -> None:
    """This xdist worker's own database, Redis database and slot directory (worker gw0, gw1, ...)."""
    index = int(worker.removeprefix("gw"))
    os.environ["WORKBENCH_HEAVY_SLOTS_DIR"] = os.path.join(tempfile.gettempdir(), f"workbench-heavy-test-{worker}")
    redis = os.environ.get("WORKBENCH_TEST_REDIS_URL", "")
    if redis:
        os.environ["WORKBENCH_TEST_REDIS_URL"] = re.sub(r"/\d+$", f"/{15 - index % 16}", redis)
    base = os.environ.get("WORKBENCH_TEST_DATABASE_URL", "")
    if base:
        name = f"{base.rsplit('/', 1)[1]}_{worker}"
        admin = create_engine(base, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            if not conn.execute(text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}).scalar():
                conn.execute(text(f'CREATE DATABASE "{name}"'))
        admin.dispose()
        os.environ["WORKBENCH_TEST_DATABASE_URL"] = f"{base.rsplit('/', 1)[0]}/{name}"


if os.environ.get("PYTEST_XDIST_WORKER"):
    _own_resources(os.environ["PYTEST_XDIST_WORKER"])

from service.app import create_app  # noqa: E402  (after the worker's environment is set)
from service.db.migrate import upgrade  # noqa: E402

PG_URL = os.environ.get("WORKBENCH_TEST_DATABASE_URL", "")
BACKENDS = ["sqlite", "postgresql"]


def _reset_postgres(url: str) -> None:
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("DROP SCHEMA IF EXISTS public CASCADE"))
        conn.execute(text("CREATE SCHEMA public"))
    engine.dispose()


@pytest.fixture(scope="session")
def postgres_url() -> str:
    if not PG_URL:
        pytest.skip("PostgreSQL tests need WORKBENCH_TEST_DATABASE_URL (set by .ci/run)")
    _reset_postgres(PG_URL)
    upgrade(PG_URL)
    return PG_URL


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("db") / "template.db"
    upgrade(f"sqlite:///{path}")
    return str(path)


def pytest_generate_tests(metafunc):
    """Tests marked `databases` run once per backend; everything else on SQLite only."""
    if "database_url" in metafunc.fixturenames and metafunc.definition.get_closest_marker("databases"):
        metafunc.parametrize("database_url", BACKENDS, indirect=True)


@pytest.fixture
def database_url(request, tmp_path, sqlite_template) -> str:
    if getattr(request, "param", "sqlite") == "sqlite":
        import shutil

        path = tmp_path / "workbench.db"
        shutil.copy(sqlite_template, path)
        yield f"sqlite:///{path}"
        return
    url = request.getfixturevalue("postgres_url")
    _truncate_postgres(url)  # before too: a test that wrote through postgres_url alone leaves its rows
    yield url
    _truncate_postgres(url)


def _truncate_postgres(url: str) -> None:
    engine = create_engine(url)
    with engine.begin() as conn:
        tables = [
            r[0]
            for r in conn.execute(
                text("SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename != 'alembic_version'")
            )
        ]
        if tables:
            conn.execute(text("TRUNCATE " + ", ".join(f'"{t}"' for t in tables) + " RESTART IDENTITY CASCADE"))
    engine.dispose()


@pytest.fixture
def app_config(database_url) -> dict:
    return {
        "env": "testing",
        "database_url": database_url,
        "ratelimit_enabled": False,
        "export_settle_seconds": 0,
        "public_url": "http://localhost",  # where the test client says it is
    }


@pytest.fixture
def app(app_config):
    app = create_app(app_config)
    yield app
    app.extensions["db"].dispose()


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def runner(app):
    return app.test_cli_runner()


@pytest.fixture
def db(app):
    return app.extensions["db"]


@pytest.fixture
def make_key(app):
    """make_key(platform, scopes=...) -> Authorization headers for a new key of that platform."""
    from service.db.platforms import create_key

    def make(platform: str = "acme", scopes: str = "events:write,progress:read,analytics:read") -> dict[str, str]:
        with app.extensions["db"].write() as session:
            key, _ = create_key(session, platform, frozenset(scopes.split(",")))
        return {"Authorization": f"Bearer {key.token}"}

    return make


@pytest.fixture
def acme(make_key):
    return make_key("acme")


@pytest.fixture
def globex(make_key):
    return make_key("globex")
