"""The app factory, the probes and the settings precedence."""

import pytest

from service.app import create_app
from service.config import ConfigError, Settings


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


def test_readyz_is_not_ready_while_writes_fail_and_ready_again_when_one_succeeds(app, client, db):
    import sqlite3

    full = {"yes": True}

    def execute(self, statement, *args, **kwargs):  # as a full disk answers every write
        if full["yes"] and str(statement).startswith("UPDATE"):
            raise sqlite3.OperationalError("database or disk is full")
        return original(self, statement, *args, **kwargs)

    from sqlalchemy.orm import Session

    original = Session.execute
    with pytest.raises(sqlite3.OperationalError), db.write():
        raise sqlite3.OperationalError("database or disk is full")  # an INSERT on a full disk
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Session, "execute", execute)
        failing = client.get("/readyz")  # it asks the database again: a write that changes nothing
        assert failing.status_code == 503 and "database or disk is full" in failing.json["detail"]
        assert client.get("/readyz", environ_base=ELSEWHERE).json["detail"] == "not ready"
        full["yes"] = False  # the disk has room again
        assert client.get("/readyz").status_code == 200
    assert not db.writes_failing()


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
