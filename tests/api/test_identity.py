"""Keys, scopes, browser sessions and the tenancy matrix: nobody sees another's learners."""

import logging

import pytest

from .helpers import LESSON, completed, event

pytestmark = pytest.mark.databases


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wb_00000000_" + "x" * 43},
        {"Authorization": "Bearer nonsense"},
        {"Authorization": "Token abc"},
    ],
)
def test_missing_or_unknown_key_is_401(client, headers):
    response = client.post("/api/v1/events", json=event(), headers=headers)
    assert response.status_code == 401
    assert response.mimetype == "application/problem+json"
    assert response.headers["WWW-Authenticate"].startswith("Bearer")


def test_revoked_key_is_401(client, app, acme):
    from service.db.platforms import revoke_key

    prefix = acme["Authorization"].split("_")[1]
    with app.extensions["db"].write() as s:
        revoke_key(s, prefix)
    assert client.post("/api/v1/events", json=event(), headers=acme).status_code == 401


@pytest.mark.databases
def test_a_revoked_key_stops_working_within_the_auth_cache_bound(app_config):
    import time

    from service.app import create_app
    from service.db.platforms import create_key, revoke_key

    app = create_app({**app_config, "auth_cache_seconds": 0.5})
    client, db = app.test_client(), app.extensions["db"]
    with db.write() as s:
        key, _ = create_key(s, "acme", frozenset({"events:write"}))
    headers = {"Authorization": f"Bearer {key.token}"}
    assert client.post("/api/v1/events", json=event(), headers=headers).status_code == 201
    with db.write() as s:
        revoke_key(s, key.prefix)
    revoked_at = time.monotonic()
    while client.post("/api/v1/events", json=event(), headers=headers).status_code != 401:
        assert time.monotonic() - revoked_at < 0.5 + 0.25, "a revoked key outlived the cache bound"
        time.sleep(0.05)
    app.extensions["db"].dispose()


@pytest.mark.databases
def test_a_recently_verified_key_costs_no_database_read(app, client, db, acme):
    from sqlalchemy import event as sa_event

    assert client.post("/api/v1/events", json=event(), headers=acme).status_code == 201
    statements: list[str] = []
    sa_event.listen(db.engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
    if db.is_sqlite:  # the event write runs on the driver's connection, past SQLAlchemy's events
        db.engine.pool.dispose()
        sa_event.listen(db.engine, "connect", lambda dbapi, _: dbapi.set_trace_callback(statements.append))
    assert client.post("/api/v1/events", json=event(), headers=acme).status_code == 201
    assert statements and not any("api_keys" in s for s in statements), statements


@pytest.mark.parametrize(
    "scopes, method, path",
    [
        ("progress:read", "post", "/api/v1/events"),
        ("events:write", "get", "/api/v1/learners/learner-1/progress"),
        ("events:write", "get", "/api/v1/learners/learner-1/events"),
        ("progress:read", "delete", "/api/v1/learners/learner-1"),
    ],
)
def test_missing_scope_is_403(client, make_key, acme, scopes, method, path):
    client.post("/api/v1/events", json=event(), headers=acme)
    limited = make_key("acme", scopes)
    kwargs = {"json": event()} if method == "post" else {}
    response = getattr(client, method)(path, headers=limited, **kwargs)
    assert response.status_code == 403 and "scope" in response.json["detail"]


def test_tenancy_matrix_each_principal_against_each_others_learners(client, acme, globex):
    assert client.post("/api/v1/events", json=event("ada"), headers=acme).status_code == 201
    assert client.post("/api/v1/events", json=event("bob"), headers=globex).status_code == 201
    web = client.post("/api/v1/session").json["learner"]
    assert client.post("/api/v1/events", json=event(web)).status_code == 201
    owners = {"ada": acme, "bob": globex}
    for principal_name, headers in (("acme", acme), ("globex", globex), ("web", None)):
        for learner, owner in (("ada", acme), ("bob", globex), (web, None)):
            mine = owner is headers
            for path in (f"/api/v1/learners/{learner}/progress", f"/api/v1/learners/{learner}/events"):
                status = client.get(path, headers=headers or {}).status_code
                if headers is None:  # the browser session: cookie only
                    assert status == (200 if learner == web else 404), (principal_name, learner, path)
                else:
                    assert status == (200 if mine else 404), (principal_name, learner, path)
    # Same learner id under two platforms: two different people.
    client.post("/api/v1/events", json=event("ada"), headers=globex)
    ada_at_acme = client.get("/api/v1/learners/ada/events", headers=acme).json["events"]
    assert len(ada_at_acme) == 1
    assert owners  # used above


def test_erasing_another_platforms_learner_is_404_and_erases_nothing(client, acme, globex):
    client.post("/api/v1/events", json=event("ada"), headers=acme)
    assert client.delete("/api/v1/learners/ada", headers=globex).status_code == 404
    assert client.get("/api/v1/learners/ada/events", headers=acme).status_code == 200


def test_browser_session_gets_a_pseudonymous_id_in_a_signed_httponly_cookie(client):
    response = client.post("/api/v1/session")
    assert response.status_code == 201
    cookie = response.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie
    learner = response.json["learner"]
    assert learner.startswith("web-") and len(learner) > 12
    again = client.post("/api/v1/session")
    assert again.status_code == 200 and again.json["learner"] == learner
    assert client.get("/api/v1/session").json["learner"] == learner


def test_a_forged_cookie_is_ignored(app):
    client = app.test_client()
    client.set_cookie("workbench_session", "eyJsZWFybmVyIjoid2ViLXZpY3RpbSJ9.forged.signature")
    assert client.get("/api/v1/session").status_code == 404
    assert client.post("/api/v1/events", json=event("web-victim")).status_code == 401


def test_browser_learner_writes_and_reads_only_themself(client):
    learner = client.post("/api/v1/session").json["learner"]
    own = event()
    del own["learner"]  # filled from the session
    assert client.post("/api/v1/events", json=own).status_code == 201
    assert client.post("/api/v1/events", json=event(learner)).status_code == 201
    other = client.post("/api/v1/events", json=event("web-someone-else"))
    assert other.status_code == 403
    progress = client.get(f"/api/v1/learners/{learner}/progress?lesson={LESSON}")
    assert progress.status_code == 200
    assert client.get("/api/v1/learners/web-someone-else/progress").status_code == 404


def test_browser_learner_can_erase_themself_and_their_cookie_then_writes_nothing(client, db):
    learner = client.post("/api/v1/session").json["learner"]
    client.post("/api/v1/events", json=completed("predict", learner))
    assert client.delete(f"/api/v1/learners/{learner}").status_code == 200
    assert client.get(f"/api/v1/learners/{learner}/progress?lesson={LESSON}").status_code == 401
    assert client.post("/api/v1/events", json=event(learner)).status_code == 401  # nothing under the erased id
    fresh = client.post("/api/v1/session")
    assert fresh.status_code == 201 and fresh.json["learner"] != learner


def test_a_planted_or_copied_cookie_stops_working_when_the_browser_loads_a_page(app, client, monkeypatch):
    """Session fixation: a cookie someone planted in this browser (or kept a copy of) is replaced
    by a new session id when a page loads, once it is an hour old; the copy is then refused."""
    import service.api.session as session_api

    planted = app.test_client()
    learner = planted.post("/api/v1/session").json["learner"]
    client.set_cookie("workbench_session", planted.get_cookie("workbench_session").value)
    monkeypatch.setattr(session_api, "ROTATE_SECONDS", -1)  # the hour has passed
    assert client.post("/api/v1/session").json["learner"] == learner  # the browser's page loads
    assert client.get("/api/v1/session").status_code == 200  # the browser goes on
    assert planted.get("/api/v1/session").status_code == 404  # the copy does not
    assert planted.post("/api/v1/events", json=event(learner)).status_code == 401


def test_learner_ids_never_reach_the_logs(client, acme, caplog):
    caplog.set_level(logging.DEBUG)
    client.post("/api/v1/events", json=event("secret-learner-77"), headers=acme)
    client.get("/api/v1/learners/secret-learner-77/progress", headers=acme)
    client.get("/api/v1/learners/secret-learner-77/events?cursor=garbage", headers=acme)
    client.delete("/api/v1/learners/secret-learner-77", headers=acme)
    assert "secret-learner-77" not in caplog.text
    assert acme["Authorization"].split()[1] not in caplog.text


@pytest.mark.databases
def test_logging_out_revokes_the_session_on_the_server(app, client):
    learner = client.post("/api/v1/session").json["learner"]
    assert client.post("/api/v1/events", json=event(learner)).status_code == 201
    stolen = client.get_cookie("workbench_session").value  # a copy someone kept
    assert client.delete("/api/v1/session").status_code == 204
    thief = app.test_client()
    thief.set_cookie("workbench_session", stolen)
    assert thief.get("/api/v1/session").status_code == 404
    assert thief.get(f"/api/v1/learners/{learner}/events").status_code == 401
    assert thief.post("/api/v1/events", json=event(learner)).status_code == 401
    fresh = thief.post("/api/v1/session")
    assert fresh.status_code == 201 and fresh.json["learner"] != learner  # a new learner, not the old one


def test_over_https_the_session_cookie_is_host_prefixed_and_a_planted_plain_one_is_no_session(app_config):
    """A sibling subdomain, or any plain-http answer the network forges, can set a cookie named
    `workbench_session` (with a Domain attribute) in this browser, and a browser refuses neither.
    Served over https the session lives only in `__Host-workbench_session`, which browsers accept
    only from this very host, over https, for path /, with no Domain: a planted cookie is not a
    session here, and the learner it names gets nothing of this browser's work."""
    from service.app import create_app

    secure = create_app({**app_config, "public_url": "https://workbench.example.edu"})
    attacker = secure.test_client()
    first = attacker.post("/api/v1/session", base_url="https://workbench.example.edu")
    planted_learner = first.json["learner"]
    (header,) = [h for h in first.headers.getlist("Set-Cookie") if "workbench_session=" in h]
    assert header.startswith("__Host-workbench_session=") and "Secure" in header and "Path=/" in header
    assert "Domain=" not in header
    own = attacker.get_cookie("__Host-workbench_session", domain="workbench.example.edu")

    victim = secure.test_client()
    victim.set_cookie("workbench_session", own.value, domain=".example.edu")  # what a sibling can plant
    assert victim.get("/api/v1/session", base_url="https://workbench.example.edu").status_code == 404
    fresh = victim.post("/api/v1/session", base_url="https://workbench.example.edu")
    assert fresh.status_code == 201 and fresh.json["learner"] != planted_learner
    mine = victim.post("/api/v1/events", json=event(fresh.json["learner"]), base_url="https://workbench.example.edu")
    assert mine.status_code == 201
    document = secure.test_client().get("/api/v1/openapi.json").json
    assert document["components"]["securitySchemes"]["browserSession"]["name"] == "__Host-workbench_session"
    secure.extensions["db"].dispose()
