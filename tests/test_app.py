"""The app factory, the probes and the settings precedence."""

import pytest

from service.app import create_app
from service.config import ConfigError, Settings
from service.db.migrate import upgrade


def test_healthz_answers_without_the_database():
    app = create_app({"env": "testing", "database_url": "postgresql+psycopg://nobody@127.0.0.1:1/none"})
    response = app.test_client().get("/healthz")
    assert response.status_code == 200 and response.json == {"status": "ok"}


@pytest.mark.databases
def test_readyz_is_ready_when_the_database_answers(client):
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json["database"] == "ok"


ELSEWHERE = {"REMOTE_ADDR": "203.0.113.9"}  # not loopback: anyone on the network


def test_readyz_is_503_with_retry_after_when_the_database_is_unreachable():
    app = create_app({"env": "testing", "database_url": "postgresql+psycopg://nobody@127.0.0.1:1/none"})
    response = app.test_client().get("/readyz")
    assert response.status_code == 503
    assert response.headers["Retry-After"].isdigit()
    assert response.mimetype == "application/problem+json"
    assert response.json["status"] == 503 and "database" in response.json["detail"]  # loopback: the operator


def test_readyz_tells_anyone_else_only_whether_it_is_ready(client):
    """Anonymous callers learn nothing of the infrastructure: not the database's host and port
    in its error, not the rate limits' store (issue 31)."""
    assert client.get("/readyz", environ_base=ELSEWHERE).json == {"status": "ready"}
    down = create_app({"env": "testing", "database_url": "postgresql+psycopg://nobody@127.0.0.1:1/none"})
    refused = down.test_client().get("/readyz", environ_base=ELSEWHERE)
    assert refused.status_code == 503 and refused.json["detail"] == "not ready"
    assert "127.0.0.1" not in refused.get_data(as_text=True)


class Held:
    """An app whose SQLite connections are held to a condition, set on each connection as it
    opens: a database at its size limit (max_page_count at the pages it has, so a write that needs
    a page fails with SQLITE_FULL, 'database or disk is full', as on a full disk), or a read-only
    one. `impose` and `lift` start new connections, as a disk filling or the operator freeing room."""

    def __init__(self, app, path):
        import sqlite3

        self.app, self.pragma = app, None
        with sqlite3.connect(path) as conn:
            self.pages = conn.execute("PRAGMA page_count").fetchone()[0]

    def hold(self, dbapi_conn, _record):
        if self.pragma:
            dbapi_conn.execute(self.pragma.format(pages=self.pages))

    def impose(self, pragma):
        self.pragma = pragma
        self.app.extensions["db"].dispose()

    def lift(self):
        self.impose(None)


@pytest.fixture
def held(app, app_config, monkeypatch):
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    monkeypatch.setattr("service.db.engine.PROBE_SECONDS", 0.0)  # every /readyz asks the database
    controlled = Held(app, app_config["database_url"].split("///", 1)[1])
    event.listen(Engine, "connect", controlled.hold)
    yield controlled
    event.remove(Engine, "connect", controlled.hold)


FULL = "PRAGMA max_page_count={pages}"
READ_ONLY = "PRAGMA query_only=1"


@pytest.mark.parametrize("pragma", [FULL, READ_ONLY], ids=["full", "read-only"])
def test_readyz_is_not_ready_while_writes_fail_and_ready_again_when_they_succeed(held, client, pragma):
    held.impose(pragma)
    failing = client.get("/readyz")  # no write has failed in this worker yet: it asks the database itself
    assert failing.status_code == 503 and failing.headers["Retry-After"].isdigit()
    said = "database or disk is full" if pragma == FULL else "readonly database"
    assert said in failing.json["detail"]  # loopback: the operator reads why
    assert "Error" not in failing.json["detail"]  # in words, no driver class name (issue 66, I1)
    assert client.get("/readyz", environ_base=ELSEWHERE).json["detail"] == "not ready"
    held.lift()
    assert client.get("/readyz").status_code == 200


@pytest.mark.parametrize("pragma", [FULL, READ_ONLY], ids=["full", "read-only"])
def test_a_write_the_database_refuses_is_a_503_without_the_drivers_words_and_one_log_line(
    held, client, make_key, pragma, caplog
):
    from tests.api.helpers import event

    headers = make_key("acme")
    assert client.post("/api/v1/events", json=event("warm"), headers=headers).status_code == 201
    held.impose(pragma)
    caplog.clear()
    big = {"events": [event("ada", data={"note": "x" * 8000}) for _ in range(50)]}
    refused = client.post("/api/v1/events", json=big, headers=headers)
    assert refused.status_code == 503 and refused.mimetype == "application/problem+json"
    detail = refused.json["detail"]
    for driver_word in ("disk", "readonly", "Error", "sqlite", "SQL"):
        assert driver_word not in detail, detail
    lines = [r for r in caplog.records if r.name == "service.database"]
    assert len(lines) == 1 and lines[0].exc_info is None, [r.getMessage() for r in caplog.records]
    assert "\n" not in lines[0].getMessage()
    held.lift()
    assert client.post("/api/v1/events", json=big, headers=headers).status_code == 201  # nothing was lost on the way


@pytest.mark.databases
def test_a_read_only_postgresql_is_not_ready_and_its_writes_are_503(app, client, make_key, monkeypatch, database_url):
    """A replica or `default_transaction_read_only`: SQLSTATE 25006, an expected condition, not a bug."""
    if not database_url.startswith("postgresql"):
        pytest.skip("SQLite's read-only database: test_readyz_is_not_ready_while_writes_fail_...")
    from sqlalchemy import event as sa_event
    from sqlalchemy.engine import Engine

    from tests.api.helpers import event

    monkeypatch.setattr("service.db.engine.PROBE_SECONDS", 0.0)
    headers = make_key("acme")

    def read_only(dbapi_conn, _record):
        with dbapi_conn.cursor() as cursor:
            cursor.execute("SET default_transaction_read_only = on")
        dbapi_conn.commit()  # else the pool's reset rolls the SET back

    sa_event.listen(Engine, "connect", read_only)
    try:
        app.extensions["db"].dispose()
        assert client.get("/readyz").status_code == 503
        refused = client.post("/api/v1/events", json=event("ada"), headers=headers)
        assert refused.status_code == 503 and "read-only" not in refused.json["detail"]
    finally:
        sa_event.remove(Engine, "connect", read_only)
        app.extensions["db"].dispose()
    assert client.get("/readyz").status_code == 200


def test_unknown_route_is_a_problem_document(client):
    response = client.get("/no/such/page")
    assert response.status_code == 404
    assert response.mimetype == "application/problem+json"
    assert set(response.json) >= {"type", "title", "status", "detail"}


def test_mapping_overrides_environment_which_overrides_defaults(monkeypatch):
    monkeypatch.setenv("WORKBENCH_MAX_TOKENS", "77")
    monkeypatch.setenv("WORKBENCH_MAX_HEADS", "9")
    settings = Settings.load({"max_heads": 3})
    assert settings.max_tokens == 77  # environment beats default
    assert settings.max_heads == 3  # mapping beats environment
    assert Settings.load().database_url.endswith("var/workbench.db")


@pytest.mark.parametrize(
    "env, message",
    [
        ({"WORKBENCH_MAX_TOKENS": "many"}, "WORKBENCH_MAX_TOKENS='many' is not a valid int"),
        ({"WORKBENCH_ENV": "staging"}, "WORKBENCH_ENV must be"),
        ({"WORKBENCH_DATABASE_URL": "mysql://x"}, "WORKBENCH_DATABASE_URL must be"),
        ({"WORKBENCH_DATABASE_URL": "sqlite://"}, "is an in-memory SQLite database"),
        ({"WORKBENCH_DATABASE_URL": "sqlite:///:memory:"}, "is an in-memory SQLite database"),
        ({"WORKBENCH_DATABASE_URL": "sqlite:///file:db?mode=memory&uri=true"}, "is an in-memory SQLite database"),
        ({"WORKBENCH_ENV": "production"}, "production needs WORKBENCH_SECRET_KEY"),
        (
            {"WORKBENCH_ENV": "production", "WORKBENCH_SECRET_KEY": "x" * 40, "WORKBENCH_DEBUG": "1"},
            "WORKBENCH_DEBUG must be off",
        ),
        ({"WORKBENCH_ENV": "production", "WORKBENCH_SECRET_KEY": "x" * 40}, "production needs WORKBENCH_PUBLIC_URL"),
        ({"WORKBENCH_PUBLIC_URL": "workbench.example"}, "WORKBENCH_PUBLIC_URL must be http(s)://"),
        ({"WORKBENCH_HEAVY_COMPUTE_SECONDS": "0"}, "WORKBENCH_HEAVY_COMPUTE_SECONDS must be above 0"),
        ({"WORKBENCH_CONNECTIONS_PER_ADDRESS": "0"}, "WORKBENCH_CONNECTIONS_PER_ADDRESS must be at least 1"),
        ({"WORKBENCH_HEAVY_COMPUTE_WAIT_SECONDS": "nan"}, "WAIT_SECONDS='nan' is not a valid float"),
        ({"WORKBENCH_HEAVY_COMPUTE_WAIT_SECONDS": "-1"}, "cannot be negative"),
        ({"WORKBENCH_HEAVY_COMPUTE_CONCURRENCY": "-2"}, "cannot be negative"),
        ({"WORKBENCH_HEAVY_COMPUTE_WAITING": "0"}, "WORKBENCH_HEAVY_COMPUTE_WAITING must be at least 1"),
    ],
)
def test_bad_settings_stop_start_up_with_a_clear_message(env, message):
    with pytest.raises(ConfigError, match=None) as info:
        Settings.load(environ=env)
    assert message in str(info.value)


@pytest.fixture
def small_disk(tmp_path):
    """A 12 MB filesystem of its own (tmpfs): what the database's disk has left is real."""
    import subprocess

    where = tmp_path / "disk"
    where.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=12m", "tmpfs", str(where)], capture_output=True).returncode:
        pytest.skip("mounting a small filesystem needs root (CI runs as root)")
    yield where
    subprocess.run(["umount", "-l", str(where)], check=False)


def test_readyz_is_not_ready_while_the_disk_cannot_take_one_maximal_request_and_ready_after(small_disk):
    """The watermark: a 1 MB body may write 4 MB, and a 1 MB margin; with less room free than that
    the instance says not ready (a balancer sends learners elsewhere before their events fail)."""
    import os

    url = f"sqlite:///{small_disk / 'workbench.db'}"
    upgrade(url)
    app = create_app(
        {"env": "testing", "database_url": url, "max_content_length": 1 << 20, "ready_margin_bytes": 1 << 20}
    )
    client = app.test_client()
    assert client.get("/readyz").status_code == 200
    filler = small_disk / "filler"
    free = os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize
    filler.write_bytes(b"\0" * (free - 4 * (1 << 20)))  # 4 MB left: under the 5 MB watermark
    refused = client.get("/readyz")
    assert refused.status_code == 503 and refused.headers["Retry-After"].isdigit()
    assert "one maximal request" in refused.json["detail"]  # loopback: the operator reads why
    filler.unlink()
    assert client.get("/readyz").status_code == 200
    app.extensions["db"].dispose()
