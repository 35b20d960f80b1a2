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


def test_readyz_is_503_with_retry_after_when_the_database_is_unreachable():
    app = create_app({"env": "testing", "database_url": "postgresql+psycopg://nobody@127.0.0.1:1/none"})
    response = app.test_client().get("/readyz")
    assert response.status_code == 503
    assert response.headers["Retry-After"].isdigit()
    assert response.mimetype == "application/problem+json"
    assert response.json["status"] == 503 and "database" in response.json["detail"]


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
