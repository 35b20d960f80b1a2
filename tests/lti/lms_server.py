"""The platform's side running for real on loopback: its key set, its OAuth2 token endpoint
(which checks the tool's signed client assertion against the tool's key set) and line items
that record the scores posted to them."""

from __future__ import annotations

import json
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

import jwt

from .platform import Platform


class LmsServer:
    def __init__(self, platform: Platform):
        self.platform = platform
        self.tool_jwks: dict = {"keys": []}  # what the administrator registered for the tool
        self.scores: dict[str, list[dict]] = {}  # line item path -> scores posted, in order
        self.tokens: set[str] = set()
        self.refuse = 0  # answer this many requests with 503
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

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

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                self._answer(200, server.platform.jwks()) if self.path == "/jwks" else self._answer(404, {})

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if server.refuse > 0:
                    server.refuse -= 1
                    return self._answer(503, {"error": "maintenance"})
                if self.path == "/token":
                    form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
                    return self._answer(*server.issue_token(form))
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
