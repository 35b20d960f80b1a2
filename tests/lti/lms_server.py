"""The platform's side running for real on loopback: its key set, its OAuth2 token endpoint
(which checks the tool's signed client assertion against the tool's key set), line items that
record the scores posted to them, and LTI Dynamic Registration's two endpoints: its OpenID
configuration and a registration endpoint that records what the tool sends (the specification's
example configuration, https://www.imsglobal.org/spec/lti-dr/v1p0 section 3.5.1)."""

from __future__ import annotations

import html
import json
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode

import jwt

from .platform import CLAIM, Platform


class LmsServer:
    def __init__(self, platform: Platform):
        self.platform = platform
        self.tool_jwks: dict = {"keys": []}  # what the administrator registered for the tool
        self.scores: dict[str, list[dict]] = {}  # line item path -> scores posted, in order
        self.tokens: set[str] = set()
        self.refuse = 0  # answer this many requests with 503
        self.members: list[dict] = []  # the course's membership (names and roles)
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        platform.auth_url = self.url + "/auth"
        self.tool = ""  # the tool's base URL, for the course page
        self.locale: str | None = None  # the learner's language, sent as launch_presentation.locale
        self.registration_token = "registration-token-" + secrets.token_hex(4)  # what an invitation's opener carries
        self.configuration_changes: dict = {}  # what this platform's OpenID configuration says otherwise
        self.registrations: list[tuple[str, dict]] = []  # (Authorization header, body) of each registration posted
        self.registration_error: dict | None = None  # answer registrations with this 400 error
        self.registration_answer: object = ...  # answer registrations 201 with this JSON instead (any JSON)

    def registration_page(self, invitation: str) -> str:
        """Moodle's "Register a tool by URL": the tool's page opens in a new window with the
        configuration's URL and a registration token; this page waits for its close message."""
        opened = (
            invitation
            + "&"
            + urlencode(
                {
                    "openid_configuration": self.url + "/openid-configuration",
                    "registration_token": self.registration_token,
                }
            )
        )
        return (
            '<!doctype html><title>Register a tool</title><p id="status">waiting</p><script>'
            'addEventListener("message", (e) => { if (e.data && e.data.subject === "org.imsglobal.lti.close") '
            'document.getElementById("status").textContent = "closed"; });'
            f"window.open({json.dumps(opened)}, 'registration');</script>"
        )

    def openid_configuration(self) -> dict:
        return {
            "issuer": self.platform.issuer,
            "token_endpoint": self.url + "/token",
            "token_endpoint_auth_methods_supported": ["private_key_jwt"],
            "token_endpoint_auth_signing_alg_values_supported": ["RS256"],
            "jwks_uri": self.url + "/jwks",
            "authorization_endpoint": self.url + "/auth",
            "registration_endpoint": self.url + "/register",
            "scopes_supported": [
                "openid",
                "https://purl.imsglobal.org/spec/lti-ags/scope/score",
                "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem",
            ],
            "response_types_supported": ["id_token"],
            "subject_types_supported": ["public", "pairwise"],
            "id_token_signing_alg_values_supported": ["RS256", "ES256"],
            "claims_supported": ["sub", "iss", "name", "given_name", "family_name", "nickname", "email"],
            "https://purl.imsglobal.org/spec/lti-platform-configuration": {
                "product_family_code": "ExampleLMS",
                "messages_supported": [{"type": "LtiResourceLinkRequest"}, {"type": "LtiDeepLinkingRequest"}],
                "variables": ["CourseSection.timeFrame.end", "CourseSection.timeFrame.begin"],
            },
            **self.configuration_changes,
        }

    def register_tool(self, authorization: str, body: dict) -> tuple[int, dict]:
        """The registration endpoint: the tool's request recorded; its client id and deployment answered."""
        self.registrations.append((authorization, body))
        if authorization != "Bearer " + self.registration_token:
            return 401, {"error": "invalid_token"}
        if self.registration_error is not None:
            return 400, self.registration_error
        if self.registration_answer is not ...:
            return 201, self.registration_answer  # type: ignore[return-value]
        key = "https://purl.imsglobal.org/spec/lti-tool-configuration"
        tool = {**body[key], "deployment_id": self.platform.deployment}
        return 201, {**body, "client_id": self.platform.client_id, key: tool}

    def __enter__(self) -> LmsServer:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def registration(self) -> dict:
        return self.platform.registration(
            keyset=None, keyset_url=self.url + "/jwks", auth_token_url=self.url + "/token"
        )

    def teaching_claims(self) -> dict:
        """What an instructor's launch from the course adds: their role, the course, the service."""
        return {
            CLAIM + "roles": ["http://purl.imsglobal.org/vocab/lis/v2/membership#Instructor"],
            CLAIM + "context": {"id": "course-7", "title": "Attention, week 3"},
            "https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice": {
                "context_memberships_url": self.url + "/memberships",
                "service_versions": ["2.0"],
            },
        }

    def grades_claim(self, item: str = "/lineitems/1") -> dict:
        return {
            "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint": {
                "scope": [
                    "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem",
                    "https://purl.imsglobal.org/spec/lti-ags/scope/score",
                ],
                "lineitem": self.url + item,
                "lineitems": self.url + "/lineitems",
            }
        }

    def issue_token(self, form: dict[str, str]) -> tuple[int, dict]:
        assertion = form.get("client_assertion", "")
        kid = jwt.get_unverified_header(assertion).get("kid")
        match = [k for k in self.tool_jwks["keys"] if k["kid"] == kid]
        if not match or form.get("grant_type") != "client_credentials":
            return 400, {"error": "invalid_client"}
        claims = jwt.decode(assertion, jwt.PyJWK(match[0]).key, algorithms=["RS256"], audience=self.url + "/token")
        if claims["iss"] != self.platform.client_id or claims["sub"] != self.platform.client_id:
            return 400, {"error": "invalid_client"}
        token = secrets.token_hex(16)
        self.tokens.add(token)
        return 200, {"access_token": token, "token_type": "Bearer", "expires_in": 3600, "scope": form["scope"]}

    def course_page(self, user: str = "user-42", target: str = "/lessons/multi-head-attention") -> str:
        """A course page with a page of the tool placed in it: the platform starts the login in an
        iframe (the target rides along as the message hint, as platforms carry their context)."""
        query = urlencode(
            {
                "iss": self.platform.issuer,
                "client_id": self.platform.client_id,
                "login_hint": user,
                "lti_message_hint": target,
                "target_link_uri": self.tool + target,
            }
        )
        return (
            "<!doctype html><title>Course</title><h1>Attention, week 3</h1>"
            f'<iframe title="lesson" src="{self.tool}/lti/login?{query}" style="width:100%;height:900px"></iframe>'
        )

    def authorize(self, params: dict[str, list[str]]) -> str:
        """The OIDC authorization endpoint: the user is logged in here, so it answers at once
        with the id_token, posted back to the tool by an auto-submitted form."""
        first = {k: v[0] for k, v in params.items()}
        target = first.get("lti_message_hint", "/lessons/multi-head-attention")
        extra = self.teaching_claims() if target == "/dashboard" else self.grades_claim()
        claims = self.platform.claims(first["nonce"], sub=first["login_hint"], **extra)
        claims[CLAIM + "target_link_uri"] = self.tool + target
        if self.locale:
            claims[CLAIM + "launch_presentation"] = {"locale": self.locale}
        token = self.platform.id_token(claims)
        return (
            f'<!doctype html><form method="post" action="{html.escape(first["redirect_uri"])}">'
            f'<input type="hidden" name="id_token" value="{token}">'
            f'<input type="hidden" name="state" value="{html.escape(first["state"])}"></form>'
            "<script>document.forms[0].submit()</script>"
        )

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                path, _, query = self.path.partition("?")
                if path == "/jwks":
                    return self._answer(200, server.platform.jwks())
                if path == "/openid-configuration":
                    return self._answer(200, server.openid_configuration())
                if path == "/memberships":
                    bearer = self.headers.get("Authorization", "").removeprefix("Bearer ")
                    typed = self.headers.get("Accept") == "application/vnd.ims.lti-nrps.v2.membershipcontainer+json"
                    if bearer not in server.tokens or not typed:
                        return self._answer(401, {})
                    return self._answer(200, {"id": server.url + "/memberships", "members": server.members})
                if path == "/course":
                    return self._html(server.course_page())
                if path == "/register-tool":
                    return self._html(server.registration_page(parse_qs(query)["invitation"][0]))
                if path == "/teach":
                    return self._html(server.course_page("teacher-1", "/dashboard"))
                if path == "/auth":
                    page = server.authorize(parse_qs(query))
                    return self._html(page)
                self._answer(404, {})

            def _html(self, page: str):
                data = page.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if server.refuse > 0:
                    server.refuse -= 1
                    return self._answer(503, {"error": "maintenance"})
                if self.path == "/token":
                    form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
                    return self._answer(*server.issue_token(form))
                if self.path == "/register":
                    return self._answer(*server.register_tool(self.headers.get("Authorization", ""), json.loads(body)))
                bearer = self.headers.get("Authorization", "").removeprefix("Bearer ")
                typed = self.headers.get("Content-Type") == "application/vnd.ims.lis.v1.score+json"
                if not self.path.endswith("/scores") or bearer not in server.tokens or not typed:
                    return self._answer(401, {})
                server.scores.setdefault(self.path.removesuffix("/scores"), []).append(json.loads(body))
                self._answer(200, {})

            def _answer(self, status: int, payload: dict):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        return Handler
