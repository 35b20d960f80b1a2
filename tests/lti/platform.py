"""A course platform as the tests play it: its own RSA key and JWKS, the id_tokens it signs
(with PyJWT, independently of the tool's library), and the browser's part of the OIDC flow."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

import jwt
from jwcrypto.jwk import JWK

CLAIM = "https://purl.imsglobal.org/spec/lti/claim/"
TOOL = "http://localhost"  # the Flask test client's host


@dataclass
class Platform:
    issuer: str = "https://lms.example.edu"
    client_id: str = "tool-client-1"
    deployment: str = "deployment-1"
    kid: str = "platform-key-1"
    auth_url: str = "https://lms.example.edu/auth"  # its OIDC authorization endpoint
    key: JWK = field(default_factory=lambda: JWK.generate(kty="RSA", size=2048))

    def jwks(self) -> dict:
        public = json.loads(self.key.export_public())
        return {"keys": [{**public, "kid": self.kid, "alg": "RS256", "use": "sig"}]}

    def registration(self, **changes) -> dict:
        """What `workbench lti register` is given for this platform."""
        return {
            "platform": "lms",
            "issuer": self.issuer,
            "client_id": self.client_id,
            "deployment_ids": (self.deployment,),
            "auth_login_url": self.auth_url,
            "auth_token_url": "https://lms.example.edu/token",
            "keyset": self.jwks(),
            **changes,
        }

    def claims(self, nonce: str, target: str = "/lessons/multi-head-attention", **changes) -> dict:
        now = int(time.time())
        return {
            "iss": self.issuer,
            "aud": self.client_id,
            "sub": "user-42",
            "iat": now,
            "exp": now + 300,
            "nonce": nonce,
            CLAIM + "message_type": "LtiResourceLinkRequest",
            CLAIM + "version": "1.3.0",
            CLAIM + "deployment_id": self.deployment,
            CLAIM + "target_link_uri": TOOL + target,
            CLAIM + "resource_link": {"id": "link-1"},
            CLAIM + "roles": ["http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"],
            **changes,
        }

    def id_token(self, claims: dict, key: JWK | None = None, kid: str | None = None) -> str:
        pem = (key or self.key).export_to_pem(private_key=True, password=None)
        return jwt.encode(claims, pem, algorithm="RS256", headers={"kid": kid or self.kid})

    def login_query(self) -> dict[str, str]:
        """What a platform sends to start a launch, but for the target."""
        return {"iss": self.issuer, "client_id": self.client_id, "login_hint": str(uuid.uuid4())}

    def login(self, client, target: str = "/lessons/multi-head-attention") -> dict[str, str]:
        """Start a launch as the platform does (third-party initiated login); the tool's redirect
        to our authorization endpoint, as its query parameters."""
        response = client.get("/lti/login", query_string={**self.login_query(), "target_link_uri": TOOL + target})
        assert response.status_code == 302, response.get_data(as_text=True)
        location = urlsplit(response.headers["Location"])
        assert f"{location.scheme}://{location.netloc}{location.path}" == self.auth_url
        return {k: v[0] for k, v in parse_qs(location.query).items()}

    def launch(self, client, state: str, id_token: str):
        """The platform's auto-submitted form back to the tool."""
        return client.post("/lti/launch", data={"state": state, "id_token": id_token})
