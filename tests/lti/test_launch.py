"""An LTI 1.3 launch: login initiation, the id_token's checks, the learner's session. A launch
that fails a check shows a page saying why and records nothing."""

from __future__ import annotations

import json
import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from jwcrypto.jwk import JWK
from sqlalchemy import func, select

from service.db.tables import Event
from service.db.tables import Platform as PlatformRow
from service.lti.registrations import NewRegistration, register
from service.lti.tool import pseudonym

from .platform import CLAIM, TOOL, Platform

pytestmark = pytest.mark.databases  # SQLite and PostgreSQL


def launched(client, lms: Platform, target: str = "/lessons/multi-head-attention", **changes):
    params = lms.login(client, target)
    return lms.launch(client, params["state"], lms.id_token(lms.claims(params["nonce"], target, **changes)))


def nothing_recorded(client, db) -> None:
    assert client.get("/api/v1/session").status_code == 404  # no learner session
    with db.read() as session:
        assert session.scalar(select(func.count()).select_from(Event)) == 0


def test_the_login_sends_the_browser_to_the_platform_with_state_and_nonce(client, lms):
    params = lms.login(client)
    assert params["client_id"] == lms.client_id and params["redirect_uri"] == "http://localhost/lti/launch"
    assert params["response_type"] == "id_token" and params["response_mode"] == "form_post"
    assert params["scope"] == "openid" and params["prompt"] == "none"
    assert params["state"] and params["nonce"]


def test_a_launch_starts_a_pseudonymous_learner_of_that_platform_and_shows_the_lesson(client, lms, db):
    response = launched(client, lms)
    assert response.status_code == 303 and response.headers["Location"] == "/lessons/multi-head-attention"
    me = client.get("/api/v1/session").get_json()
    assert me == {"learner": pseudonym(lms.issuer, "user-42"), "platform": "lms", "course": False}
    event = {
        "id": "00000000-0000-4000-8000-000000000001",
        "learner": me["learner"],
        "lesson": "multi-head-attention",
        "event": "started",
        "occurred_at": "2026-11-30T10:00:00Z",
        "data": {},
    }
    assert client.post("/api/v1/events", json=event).status_code == 201
    with db.read() as session:
        stored = session.execute(select(Event.learner, PlatformRow.name).join(PlatformRow)).one()
    assert tuple(stored) == (me["learner"], "lms")  # the platform's learner, not the web's


def test_the_same_user_is_the_same_learner_at_every_launch_and_names_are_not_kept(client, app, lms):
    launched(client, lms, name="Ada Lovelace", email="ada@example.edu")
    first = client.get("/api/v1/session").get_json()["learner"]
    other = app.test_client()
    launched(other, lms)
    assert other.get("/api/v1/session").get_json()["learner"] == first
    assert "Ada" not in first and "ada@" not in first


@pytest.mark.parametrize("locale, kept", [("es-MX", "es"), ("zh-Hans-CN", "zh-CN"), ("zh-TW", None), ("fr-FR", None)])
def test_the_launchs_locale_is_the_language_the_lesson_opens_in(client, lms, locale, kept):
    """launch_presentation.locale, where we offer that language (Traditional Chinese is not
    Simplified: it is not shown in the wrong script)."""
    response = launched(client, lms, **{CLAIM + "launch_presentation": {"locale": locale}})
    assert response.status_code == 303
    lesson = client.get("/api/v1/lessons/multi-head-attention").get_json()
    assert lesson["locale"] == (kept or "en")
    assert (client.get_cookie("workbench_lang").value if client.get_cookie("workbench_lang") else None) == kept


@pytest.mark.parametrize("target", ["/figures/four-heads", "/explorables/multi-head-attention"])
def test_a_launch_can_target_the_workbench_or_a_figure(client, lms, target):
    response = launched(client, lms, target)
    assert response.status_code == 303 and response.headers["Location"] == target


@pytest.mark.parametrize("target", ["/lti/launch", "/", ""])
def test_a_launch_whose_tool_url_is_the_launch_endpoint_or_the_root_lands_on_the_lesson(client, lms, target, caplog):
    caplog.set_level(logging.INFO, logger="service.lti")
    response = launched(client, lms, target)
    assert response.status_code == 303 and response.headers["Location"] == "/lessons/multi-head-attention"
    assert client.get("/api/v1/session").status_code == 200  # a learner session, as for a lesson's launch
    assert "landing on /lessons/multi-head-attention" in caplog.text


def test_a_launch_at_a_page_the_tool_lacks_is_still_refused(client, lms):
    response = client.get("/lti/login", query_string={**lms.login_query(), "target_link_uri": TOOL + "/lessons/nope"})
    assert response.status_code == 400 and b"this tool has no page at /lessons/nope" in response.data


def _expired(lms, nonce):
    past = int(time.time()) - 3600
    return lms.id_token(lms.claims(nonce, iat=past - 300, exp=past))


REFUSALS = {
    "bad signature": (lambda lms, n: lms.id_token(lms.claims(n), key=JWK.generate(kty="RSA", size=2048)), "Signature"),
    "unknown kid": (lambda lms, n: lms.id_token(lms.claims(n), kid="nobody"), "Unable to find public key"),
    "wrong aud": (lambda lms, n: lms.id_token(lms.claims(n, aud="someone-else")), "no platform is registered"),
    "wrong aud among several": (
        lambda lms, n: lms.id_token(lms.claims(n, aud=[lms.client_id, "x"], azp="x")),
        "authorized party",
    ),
    "expired": (_expired, "expired"),
    "unknown deployment": (
        lambda lms, n: lms.id_token(lms.claims(n, **{CLAIM + "deployment_id": "d-unknown"})),
        "d-unknown",
    ),
    "unknown issuer": (lambda lms, n: lms.id_token(lms.claims(n, iss="https://evil.example")), "evil.example"),
    "wrong message type": (
        lambda lms, n: lms.id_token(lms.claims(n, **{CLAIM + "message_type": "LtiSubmissionReviewRequest"})),
        "LtiResourceLinkRequest and LtiDeepLinkingRequest messages",
    ),
    "wrong nonce": (
        lambda lms, n: lms.id_token(lms.claims("made-up")),
        "not issued for the login this browser started",
    ),
    "a list for the nonce": (lambda lms, n: lms.id_token(lms.claims([n])), "carries no nonce (a string)"),
    "a string for the resource link": (
        lambda lms, n: lms.id_token(lms.claims(n, **{CLAIM + "resource_link": "link-1"})),
        "resource_link claim must be an object",
    ),
    "a string for the grade service": (
        lambda lms, n: lms.id_token(
            lms.claims(n, **{"https://purl.imsglobal.org/spec/lti-ags/claim/endpoint": "https://lms.example.edu/ags"})
        ),
        "endpoint claim must be an object",
    ),
    "a string for the line item's id": (
        lambda lms, n: lms.id_token(
            lms.claims(n, **{"https://purl.imsglobal.org/spec/lti-ags/claim/endpoint": {"lineitem": ["x"]}})
        ),
        "lineitem must be a URL",
    ),
    "a string for the roles": (lambda lms, n: lms.id_token(lms.claims(n, **{CLAIM + "roles": "Learner"})), "roles"),
    "missing page": (
        lambda lms, n: lms.id_token(lms.claims(n, **{CLAIM + "target_link_uri": "http://localhost/lessons/nope"})),
        "no page at /lessons/nope",
    ),
}


@pytest.mark.parametrize("case", REFUSALS)
def test_a_bad_launch_shows_why_and_records_nothing(client, lms, db, case):
    token_for, reason = REFUSALS[case]
    params = lms.login(client)
    response = lms.launch(client, params["state"], token_for(lms, params["nonce"]))
    assert response.status_code == 400 and response.mimetype == "text/html"
    assert reason in response.get_data(as_text=True)
    nothing_recorded(client, db)


def test_a_replayed_launch_is_refused(client, app, lms, db):
    params = lms.login(client)
    token = lms.id_token(lms.claims(params["nonce"]))
    assert lms.launch(client, params["state"], token).status_code == 303
    thief = app.test_client()
    thief.set_cookie(f"lti1p3-{params['state']}", params["state"])  # even with the state cookie
    replay = lms.launch(thief, params["state"], token)
    assert replay.status_code == 400 and "start the launch again" in replay.get_data(as_text=True)
    assert thief.get("/api/v1/session").status_code == 404


def test_a_launch_in_another_browser_than_the_login_is_refused(app, lms, db):
    """The state is bound to the browser that started the login (its cookie)."""
    started, other = app.test_client(), app.test_client()
    params = lms.login(started)
    response = lms.launch(other, params["state"], lms.id_token(lms.claims(params["nonce"])))
    assert response.status_code == 400 and "State not found" in response.get_data(as_text=True)
    nothing_recorded(other, db)


def test_an_unused_token_from_one_browser_does_not_launch_in_another(app, lms, db):
    """Each login's nonce is bound to its state: browser B, with its own state and cookie, cannot
    spend the id_token the platform issued for browser A's login (issue 31)."""
    browser_a, browser_b = app.test_client(), app.test_client()
    login_a, login_b = lms.login(browser_a), lms.login(browser_b)
    token_a = lms.id_token(lms.claims(login_a["nonce"]))
    stolen = lms.launch(browser_b, login_b["state"], token_a)
    assert stolen.status_code == 400 and "not issued for the login this browser started" in stolen.get_data(
        as_text=True
    )
    nothing_recorded(browser_b, db)
    assert lms.launch(browser_a, login_a["state"], token_a).status_code == 303  # A's own launch still works


def test_a_forged_launch_does_not_spend_the_genuine_nonce(client, lms):
    params = lms.login(client)
    forged = lms.id_token(lms.claims(params["nonce"], sub="intruder"), key=JWK.generate(kty="RSA", size=2048))
    assert lms.launch(client, params["state"], forged).status_code == 400
    genuine = lms.launch(client, params["state"], lms.id_token(lms.claims(params["nonce"])))
    assert genuine.status_code == 303
    assert client.get("/api/v1/session").get_json()["learner"] == pseudonym(lms.issuer, "user-42")


def test_an_anonymous_login_without_a_user_hint_is_refused_with_a_page(client, lms):
    response = client.get(
        "/lti/login",
        query_string={
            "iss": lms.issuer,
            "client_id": lms.client_id,
            "target_link_uri": "http://localhost/lessons/multi-head-attention",
        },
    )
    assert response.status_code == 400 and "login_hint" in response.get_data(as_text=True)


def test_no_launch_claim_is_kept_and_a_login_leaves_only_a_short_lived_row(client, lms, db):
    import datetime as dt

    from service.db.lti_tables import LtiValue

    params = lms.login(client)
    claims = lms.claims(params["nonce"], name="Ada Lovelace", email="ada@example.edu", given_name="Ada")
    with db.read() as session:
        (login,) = session.scalars(select(LtiValue)).all()  # the login's state and nonce, nothing else
        assert login.value == params["nonce"]
        expires = login.expires_at if login.expires_at.tzinfo else login.expires_at.replace(tzinfo=dt.UTC)
        assert expires <= dt.datetime.now(dt.UTC) + dt.timedelta(minutes=11)
    assert lms.launch(client, params["state"], lms.id_token(claims)).status_code == 303
    with db.read() as session:
        kept = " ".join(json.dumps(v.value) for v in session.scalars(select(LtiValue)).all())
    for personal in ("Ada", "ada@example.edu", "user-42", pseudonym(lms.issuer, "user-42")):
        assert personal not in kept


def test_a_login_for_an_unknown_platform_or_page_is_refused(client, lms):
    unknown = client.get(
        "/lti/login", query_string={"iss": "https://nobody.example", "login_hint": "x", "target_link_uri": "/"}
    )
    assert unknown.status_code == 400 and "nobody.example" in unknown.get_data(as_text=True)
    missing = client.get(
        "/lti/login",
        query_string={"iss": lms.issuer, "login_hint": "x", "target_link_uri": "http://localhost/admin"},
    )
    assert missing.status_code == 400 and "no page at /admin" in missing.get_data(as_text=True)


def test_over_https_the_launched_session_works_inside_the_platforms_iframe(client, app, lms):
    """Cross-site iframes only get `SameSite=None; Secure` cookies (partitioned, CHIPS)."""
    params = lms.login(client)
    response = client.post(
        "/lti/launch",
        data={"state": params["state"], "id_token": lms.id_token(lms.claims(params["nonce"]))},
        base_url="https://localhost",
    )
    session_cookie = next(c for c in response.headers.getlist("Set-Cookie") if c.startswith("workbench_session="))
    assert all(part in session_cookie for part in ("SameSite=None", "Secure", "Partitioned", "HttpOnly"))
    web = app.test_client().post("/api/v1/session", base_url="https://localhost")  # a web learner's: Lax
    assert "SameSite=None" not in web.headers.get("Set-Cookie", "")


@pytest.fixture
def served_jwks():
    """The platform's key set on a real loopback HTTP server, as platforms publish it."""
    platform = Platform(issuer="https://served.example")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps(platform.jwks()).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield platform, f"http://127.0.0.1:{server.server_address[1]}/jwks"
    server.shutdown()


def test_a_launch_verified_with_the_key_set_the_platform_serves(client, app, served_jwks):
    platform, url = served_jwks
    with app.extensions["db"].write() as session:
        register(session, NewRegistration(**platform.registration(keyset=None, keyset_url=url)))
    response = launched(client, platform)
    assert response.status_code == 303
    assert client.get("/api/v1/session").get_json()["learner"] == pseudonym(platform.issuer, "user-42")


def test_the_login_may_be_posted_as_a_form(client, lms):
    """Platforms initiate the login with GET or with an auto-submitted POST form."""
    target = "http://localhost/figures/four-heads"
    form = {"iss": lms.issuer, "client_id": lms.client_id, "login_hint": "x", "target_link_uri": target}
    response = client.post("/lti/login", data=form)
    assert response.status_code == 302 and response.headers["Location"].startswith(lms.auth_url + "?")


def test_logins_from_one_address_are_rate_limited(app_config, lms):
    """Each login stores a nonce: a client cannot flood the tool with them."""
    from service.app import create_app

    limited = create_app({**app_config, "ratelimit_enabled": True, "ratelimit_learner": "2/minute"})
    client = limited.test_client()
    query = {"iss": lms.issuer, "login_hint": "x", "target_link_uri": "http://localhost/figures/four-heads"}
    statuses = [client.get("/lti/login", query_string=query).status_code for _ in range(3)]
    assert statuses == [302, 302, 429]
    limited.extensions["db"].dispose()
