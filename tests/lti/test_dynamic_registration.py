"""LTI Dynamic Registration, as an administrator and a platform do it: `workbench lti invite`, the
platform opening the invitation with its OpenID configuration, the tool's registration request
checked field by field against the specification (https://www.imsglobal.org/spec/lti-dr/v1p0,
sections 3.5-3.6), the stored registration, then a first launch, deep linking and a grade with no
other step; and every refusal, each storing nothing."""

from __future__ import annotations

import contextlib
import html
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest
from click.testing import CliRunner
from sqlalchemy import func, select

from service.cli import main
from service.db.lti_tables import LtiRegistration
from service.lti import dynamic
from service.lti.notices import USER_DELETED
from service.lti.registrations import NewRegistration
from service.lti.registrations import register as store
from service.lti.tool import PatientSession

from .lms_server import LmsServer
from .platform import CLAIM, TOOL, Platform
from .test_deep_linking import deep_linking_request
from .test_erasure import every_row
from .test_grades import complete, send
from .test_notices import notice

pytestmark = pytest.mark.databases  # SQLite and PostgreSQL

TOOL_CONFIGURATION = "https://purl.imsglobal.org/spec/lti-tool-configuration"


@pytest.fixture
def platform(app, client):
    """A platform on loopback that has not registered the tool: its issuer is its own address."""
    with LmsServer(Platform(client_id="dynamic-client-9", deployment="deployment-9")) as server:
        server.platform.issuer = server.url
        server.tool_jwks = client.get("/lti/jwks").get_json()  # for its token endpoint's checks
        yield server


@pytest.fixture
def cli(app, monkeypatch):
    monkeypatch.setenv("WORKBENCH_DATABASE_URL", app.extensions["settings"].database_url)
    return lambda *args: CliRunner().invoke(main, ["lti", *args])


def invitation(cli) -> str:
    printed = cli("invite", "--platform", "moodle-east")
    assert printed.exit_code == 0, printed.output
    url = urlsplit(printed.output.splitlines()[0])
    assert url.path == "/lti/register"
    return parse_qs(url.query)["invitation"][0]


def opened(client, platform: LmsServer, token: str, **changes):
    """The platform opens the invitation, as Moodle does in its registration dialog."""
    query = {
        "invitation": token,
        "openid_configuration": platform.url + "/openid-configuration",
        "registration_token": platform.registration_token,
        **changes,
    }
    return client.get("/lti/register", query_string=query)


def stored(app) -> list[LtiRegistration]:
    with app.extensions["db"].read() as session:
        return list(session.scalars(select(LtiRegistration)))


def test_an_invitation_registers_the_tool_with_the_request_the_specification_describes(app, client, cli, platform):
    page = opened(client, platform, invitation(cli))
    assert page.status_code == 200, page.get_data(as_text=True)
    assert '<script src="/static/js/lti-close.js"></script>' in page.get_data(as_text=True)
    # the platform may show it in its dialog's iframe, or keep it as the window it opened
    assert page.headers["Content-Security-Policy"].endswith(f"frame-ancestors 'self' {platform.url}")
    assert page.headers["Cross-Origin-Opener-Policy"] == "unsafe-none"
    assert "org.imsglobal.lti.close" in client.get("/static/js/lti-close.js").get_data(as_text=True)
    ((authorization, body),) = platform.registrations
    assert authorization == "Bearer " + platform.registration_token
    assert body["application_type"] == "web"
    assert body["response_types"] == ["id_token"]
    assert body["grant_types"] == ["implicit", "client_credentials"]
    assert body["initiate_login_uri"] == TOOL + "/lti/login"
    assert body["redirect_uris"] == [TOOL + "/lti/launch"]
    assert body["jwks_uri"] == TOOL + "/lti/jwks"
    assert body["token_endpoint_auth_method"] == "private_key_jwt"
    assert body["client_name"] and body["logo_uri"].startswith(TOOL)
    assert set(body["scope"].split(" ")) == {
        "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem",
        "https://purl.imsglobal.org/spec/lti-ags/scope/score",
        "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly",
    }
    tool = body[TOOL_CONFIGURATION]
    assert tool["domain"] == "localhost" and tool["target_link_uri"] == TOOL + "/lessons/multi-head-attention"
    assert {m["type"] for m in tool["messages"]} == {"LtiResourceLinkRequest", "LtiDeepLinkingRequest"}
    assert "sub" in tool["claims"] and "email" not in tool["claims"]
    (row,) = stored(app)
    assert (row.issuer, row.client_id, row.deployment_ids) == (platform.url, "dynamic-client-9", ["deployment-9"])
    assert (row.auth_login_url, row.auth_token_url, row.keyset_url) == (
        platform.url + "/auth",
        platform.url + "/token",
        platform.url + "/jwks",
    )
    assert row.registered_by == "dynamic" and row.keyset is None
    listed = cli("list").output.strip().split("\t")
    assert listed[2:5] == [platform.url, "dynamic-client-9", "deployment-9"] and listed[-1] == "dynamic"


def test_the_first_launch_deep_linking_a_grade_and_a_notice_need_no_other_step(app, client, cli, platform):
    assert opened(client, platform, invitation(cli)).status_code == 200
    lms = platform.platform
    params = lms.login(client)  # the login redirects to the authorization endpoint the configuration named
    claims = lms.claims(params["nonce"], **platform.grades_claim())
    assert lms.launch(client, params["state"], lms.id_token(claims)).status_code == 303
    learner = client.get("/api/v1/session").get_json()["learner"]
    complete(client, learner, "predict")
    assert send(app) == {"sent": 1, "failed": 0}  # signed for the token endpoint the configuration named
    assert platform.scores["/lineitems/1"][-1]["scoreGiven"] == 1
    params = lms.login(client)  # an instructor's deep linking launch, returning to the platform's own host
    request = deep_linking_request(lms, params["nonce"], return_url=platform.url + "/deep-linking/return")
    choices = lms.launch(client, params["state"], lms.id_token(request))
    assert choices.status_code == 200, choices.get_data(as_text=True)
    text = choices.get_data(as_text=True)
    assert f'action="{platform.url}/deep-linking/return"' in text and "Long contexts: sliding windows" in text
    # the platform deletes its user: a signed notice erases the learner here
    deleted = lms.id_token(notice(lms, USER_DELETED, sub="user-42"))
    answer = client.post("/lti/notices", json={"notices": [{"jwt": deleted}]})
    assert answer.status_code == 200 and answer.json["notices"][0]["done"] == "erased"
    assert not any(learner in row for _, row in every_row(app.extensions["db"]))


def test_an_invitation_is_good_once(app, client, cli, platform):
    token = invitation(cli)
    assert opened(client, platform, token).status_code == 200
    again = opened(client, platform, token)
    assert again.status_code == 400 and "used already" in again.get_data(as_text=True)
    assert len(stored(app)) == 1 and len(platform.registrations) == 1  # the second never reached the platform


def test_an_expired_or_forged_invitation_is_refused_and_nothing_is_asked_or_stored(app, client, platform):
    with app.extensions["db"].write() as session:
        expired = dynamic.invite(session, "moodle-east", seconds=0)
    for token in (expired, "forged-" + "x" * 40, ""):
        page = opened(client, platform, token)
        assert page.status_code == 400 and "never issued" in page.get_data(as_text=True)
    assert stored(app) == [] and platform.registrations == []


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"issuer": "https://lms.example.edu"}, "is not on the host it was read from"),
        ({"id_token_signing_alg_values_supported": ["ES256"]}, "RS256"),
        ({"response_types_supported": ["code"]}, "id_token response type"),
        (
            {
                "https://purl.imsglobal.org/spec/lti-platform-configuration": {
                    "messages_supported": [{"type": "LtiResourceLinkRequest"}]
                }
            },
            "LtiDeepLinkingRequest",
        ),
        ({"registration_endpoint": "http://lms.example.edu/register"}, "must be an https URL"),
    ],
)
def test_a_configuration_that_does_not_hold_is_refused_and_the_invitation_stays_good(
    app, client, cli, platform, changes, words
):
    platform.configuration_changes = changes
    token = invitation(cli)
    page = opened(client, platform, token)
    assert page.status_code == 400 and words in page.get_data(as_text=True)
    assert "lms.example.edu" not in page.get_data(as_text=True).replace("http://lms.example.edu/register", "")
    assert stored(app) == [] and platform.registrations == []  # refused before anything was posted
    platform.configuration_changes = {}
    assert opened(client, platform, token).status_code == 200  # not spent yet: the corrected platform registers


def test_a_platform_that_refuses_the_registration_is_said_and_nothing_is_stored(app, client, cli, platform):
    platform.registration_error = {"error": "invalid_client_metadata", "error_description": "no such domain here"}
    page = html.unescape(opened(client, platform, invitation(cli)).get_data(as_text=True))
    assert "the platform's registration_endpoint could not be read: it must answer 2xx with JSON" in page
    assert "no such domain here" not in page  # what a platform answered is never echoed (issue 66, M1)
    assert stored(app) == []


def test_a_configuration_url_that_is_not_https_is_refused_unless_it_is_this_machine(app, client, cli, platform):
    page = opened(client, platform, invitation(cli), openid_configuration="http://lms.example.edu/openid")
    assert page.status_code == 400 and "openid_configuration must be an https URL" in page.get_data(as_text=True)
    assert stored(app) == []


def test_a_launch_from_a_dynamically_registered_platform_still_checks_its_deployment(app, client, cli, platform):
    assert opened(client, platform, invitation(cli)).status_code == 200
    lms = platform.platform
    params = lms.login(client)
    claims = lms.claims(params["nonce"], **{CLAIM + "deployment_id": "deployment-other"})
    refused = lms.launch(client, params["state"], lms.id_token(claims))
    assert refused.status_code == 400 and client.get("/api/v1/session").get_json().get("learner") is None
    with app.extensions["db"].read() as session:
        assert session.scalar(select(func.count()).select_from(LtiRegistration)) == 1


# -- a platform's registration that would reach inside (issue 66, M1, M2, L1, L2)

SECRET = "internal-issuer.corp.invalid"  # what an inside answer holds: never shown to whoever opened the page


class Hostile(BaseHTTPRequestHandler):
    """What an attacker points openid_configuration at: a redirect inside, a huge or dripping document."""

    def do_GET(self):
        if self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "http://169.254.169.254/latest/meta-data/")
            self.end_headers()
        elif self.path == "/huge":  # 200 MB announced, sent until the reader stops
            self.send_response(200)
            self.send_header("Content-Length", str(200 * 2**20))
            self.end_headers()
            chunk = json.dumps({"issuer": SECRET}).encode().ljust(65536, b" ")
            with contextlib.suppress(OSError):
                for _ in range(200 * 16):
                    self.wfile.write(chunk)
        elif self.path == "/drip":  # a byte at a time, never done within the deadline
            self.send_response(200)
            self.send_header("Content-Length", "100000")
            self.end_headers()
            with contextlib.suppress(OSError):
                for _ in range(100):
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(0.2)

    def log_message(self, *args):
        pass


@pytest.fixture
def hostile():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(
    "where",
    [
        "/redirect",
        "/huge",
        "/drip",
        "https://169.254.169.254/latest/meta-data/",  # the cloud metadata address
        "https://10.0.0.7/openid-configuration",  # a private network
        "https://[::ffff:192.168.1.1]/openid-configuration",  # a private one written as IPv6
    ],
)
def test_a_configuration_that_would_reach_inside_is_refused_within_the_deadline_without_echo(
    app, client, cli, platform, hostile, monkeypatch, where
):
    monkeypatch.setattr(dynamic, "DEADLINE_SECONDS", 2.0)
    started = time.monotonic()
    url = hostile + where if where.startswith("/") else where
    page = opened(client, platform, invitation(cli), openid_configuration=url)
    text = html.unescape(page.get_data(as_text=True))
    assert page.status_code == 400 and time.monotonic() - started < 5
    assert "the platform's openid_configuration could not be read" in text and SECRET not in text
    assert stored(app) == []


def test_an_invitation_is_spent_after_its_failed_attempts(app, client, cli, platform, hostile):
    token = invitation(cli)
    for _ in range(dynamic.FAILURES):
        assert opened(client, platform, token, openid_configuration=hostile + "/redirect").status_code == 400
    again = opened(client, platform, token)  # a good platform now: the invitation is gone
    assert again.status_code == 400 and "used already" in again.get_data(as_text=True)
    assert stored(app) == [] and platform.registrations == []


@pytest.mark.parametrize("answer", [{}, [], 5, None, "x", {"client_id": 7}])
def test_a_malformed_registration_answer_is_a_400_page_and_nothing_is_stored(app, client, cli, platform, answer):
    platform.registration_answer = answer
    page = opened(client, platform, invitation(cli))
    assert page.status_code == 400 and "no client_id or no deployment_id" in page.get_data(as_text=True)
    assert stored(app) == []


def test_a_dynamic_registration_never_replaces_an_administrators(app, client, cli, platform):
    with app.extensions["db"].write() as session:  # the same issuer and client id, registered by a command
        store(session, NewRegistration(**{**platform.registration(), "platform": "other-campus"}))
    page = opened(client, platform, invitation(cli))
    assert page.status_code == 400 and "registered already" in page.get_data(as_text=True)
    (row,) = stored(app)
    assert row.registered_by == "command" and row.keyset_url == platform.url + "/jwks"


def test_a_dynamically_registered_platforms_learners_are_accounts_on_its_own_host(app, client, cli, platform, make_key):
    """Issue 67: the xAPI actor's account names the platform's real host (its issuer), not a made-up one."""
    assert opened(client, platform, invitation(cli)).status_code == 200
    lms = platform.platform
    params = lms.login(client)
    assert lms.launch(client, params["state"], lms.id_token(lms.claims(params["nonce"]))).status_code == 303
    learner = client.get("/api/v1/session").get_json()["learner"]
    complete(client, learner, "predict")
    answer = client.get(
        "/api/v1/xapi/statements",
        headers={**make_key("moodle-east", "analytics:read"), "X-Experience-API-Version": "1.0.3"},
    )
    sent = answer.json["statements"]
    assert sent and {s["actor"]["account"]["homePage"] for s in sent} == {platform.url}  # its issuer's origin
    assert all(s["actor"]["account"]["name"] == learner for s in sent)


def test_a_host_that_answers_an_inside_address_to_a_second_lookup_is_never_reached(
    app, client, cli, platform, monkeypatch
):
    """DNS rebinding: the name resolves to a public address when checked and to this machine when the fetch
    would look it up again. The fetch connects to the address checked (and fails here: no route out), so
    nothing inside is ever reached."""
    inside = socket.create_server(("127.0.0.1", 0))
    inside.settimeout(0.2)
    real = socket.getaddrinfo
    lookups: list[str] = []

    def rebinding(host, port, *args, **kwargs):
        if host != "platform.rebind.test":
            return real(host, port, *args, **kwargs)
        lookups.append(host)
        address = "127.0.0.1" if len(lookups) > 1 else "8.8.8.8"  # public when checked, inside after
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, inside.getsockname()[1]))]

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    monkeypatch.setattr(PatientSession, "TIMEOUT_SECONDS", 1.0)
    url = f"https://platform.rebind.test:{inside.getsockname()[1]}/openid-configuration"
    page = opened(client, platform, invitation(cli), openid_configuration=url)
    with contextlib.suppress(TimeoutError):
        inside.accept()
        raise AssertionError("the fetch reached this machine: a second lookup was trusted")
    inside.close()
    assert page.status_code == 400 and lookups == ["platform.rebind.test"]  # looked up once, then pinned
    assert stored(app) == []


def test_a_pinned_fetch_still_names_the_platforms_host_to_tls():
    adapter = dynamic.PinnedAdapter("platform.example.org")
    assert adapter.poolmanager.connection_pool_kw["server_hostname"] == "platform.example.org"
    assert adapter.poolmanager.connection_pool_kw["assert_hostname"] == "platform.example.org"
    assert dynamic._at("https://platform.example.org:8443/a?b=1", "2001:db8::1") == "https://[2001:db8::1]:8443/a?b=1"
    assert dynamic._at("https://platform.example.org/c", "93.184.216.34") == "https://93.184.216.34/c"


def test_a_pinned_fetch_reaches_the_address_with_the_hosts_certificate_checked(tmp_path):
    """An https server on an address whose certificate names only `platform.test`: through the adapter, a fetch
    of the address verifies that name and is answered; without it, the certificate does not match."""
    import datetime as dt
    import http.server
    import ssl

    import requests
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "platform.test")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("platform.test")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    (tmp_path / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "key.pem").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    seen: list[str | None] = []

    class Answer(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append(self.headers["Host"])
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    address = dynamic._at(f"https://platform.test:{server.server_address[1]}/c", "127.0.0.1")
    try:
        with requests.Session() as session:
            session.mount("https://", dynamic.PinnedAdapter("platform.test"))
            host = {"Host": f"platform.test:{server.server_address[1]}"}
            assert session.get(address, headers=host, verify=str(tmp_path / "cert.pem"), timeout=5).json() == {}
        with pytest.raises(requests.exceptions.SSLError), requests.Session() as plain:
            plain.get(address, verify=str(tmp_path / "cert.pem"), timeout=5)
    finally:
        server.shutdown()
    assert seen == [f"platform.test:{server.server_address[1]}"]
