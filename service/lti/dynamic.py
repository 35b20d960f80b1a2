"""LTI Dynamic Registration 1.0 (https://www.imsglobal.org/spec/lti-dr/v1p0): the platform registers
the tool itself. An administrator runs `workbench lti invite` and pastes the URL it prints into the
platform ("Register a tool by URL" in Moodle 4.1+); the platform opens it with its
`openid_configuration` URL and a `registration_token`. The tool reads that configuration, checks it
(its issuer on the URL's host, the id_token response type, RS256, both LTI messages), posts its own
registration (pylti1p3's `DynamicRegistration` writes the body), and stores the client id and the
deployment the platform answers as `workbench lti register` would; the page then posts
`org.imsglobal.lti.close` to the platform's window (frontend/js/lti-close.js). An invitation is good
once, until it expires; a spent, expired or unknown one, a configuration that does not hold, or a
platform that refuses stores nothing."""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets
from typing import Any
from urllib.parse import urlsplit

import requests
from pylti1p3.dynamic_registration import DynamicRegistration
from pylti1p3.exception import LtiException, LtiServiceException
from sqlalchemy import delete
from sqlalchemy.orm import Session

from ..db.lti_tables import LtiValue
from .registrations import NewRegistration
from .tool import SCOPES, PatientSession, _aware

PLATFORM_CONFIGURATION = "https://purl.imsglobal.org/spec/lti-platform-configuration"
TOOL_CONFIGURATION = "https://purl.imsglobal.org/spec/lti-tool-configuration"
MESSAGES = ("LtiResourceLinkRequest", "LtiDeepLinkingRequest")
LOOPBACK = ("127.0.0.1", "localhost", "::1")


class RegistrationRefused(Exception):
    """A registration this tool will not complete; the message is shown to the administrator."""


# -- invitations: one-time, expiring, kept by their digest only


def invite(session: Session, platform: str, seconds: int) -> str:
    """A new invitation for `platform` (our platform its learners will belong to), good for one
    registration within `seconds`: its token."""
    token = secrets.token_urlsafe(32)
    expires = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=seconds)
    session.add(LtiValue(key=_key(token), value={"platform": platform}, expires_at=expires))
    return token


def invited(session: Session, token: str) -> str | None:
    """The platform an unspent, unexpired invitation is for; None for any other token."""
    row = session.get(LtiValue, _key(token)) if token else None
    if row is None or _aware(row.expires_at) <= dt.datetime.now(dt.UTC):
        return None
    return str(row.value["platform"])


def spend(session: Session, token: str) -> bool:
    """Use the invitation up (in the transaction that stores its registration); only one caller gets True."""
    gone = session.execute(
        delete(LtiValue).where(LtiValue.key == _key(token), LtiValue.expires_at > dt.datetime.now(dt.UTC))
    )
    return bool(gone.rowcount)  # type: ignore[attr-defined]


def _key(token: str) -> str:
    return "lti-invitation-" + hashlib.sha256(token.encode()).hexdigest()


# -- the registration


class Registrar(DynamicRegistration):
    """This tool's registration request, and the checks of what the platform says before and after."""

    client_name = "Multi-head attention workbench"
    description = "A lesson on multi-head attention with a live two-head causal attention workbench."

    def __init__(self, base: str, target: str, configuration_url: str, token: str | None, loopback_http: bool):
        self.base, self.target, self.loopback_http = base, target, loopback_http
        self.configuration_url, self.token = configuration_url, token

    def get_request_session(self) -> requests.Session:
        return PatientSession()  # a platform that does not answer must not hold a worker thread

    def get_initiate_login_uri(self) -> str:
        return self.base + "/lti/login"

    def get_jwks_uri(self) -> str:
        return self.base + "/lti/jwks"

    def get_redirect_uris(self) -> list[str]:
        return [self.base + "/lti/launch"]

    def get_scopes(self) -> list[str]:
        return list(SCOPES)

    def get_domain(self) -> str:
        return urlsplit(self.base).netloc

    def get_target_link_uri(self) -> str:
        return self.target

    def get_claims(self) -> list[str]:
        return ["iss", "sub"]  # no name, no e-mail: a learner is a pseudonym here

    def get_messages(self) -> list[dict[str, str]]:
        return [
            {"type": "LtiResourceLinkRequest", "target_link_uri": self.target},
            {
                "type": "LtiDeepLinkingRequest",
                "target_link_uri": self.base + "/lti/launch",
                "label": "Multi-head attention: choose a lesson or an explorable",
            },
        ]

    def get_logo_uri(self) -> str:
        return self.base + "/favicon.ico"

    def get_openid_configuration_endpoint(self) -> str:
        return self.configuration_url

    def get_registration_token(self) -> str | None:  # type: ignore[override]
        return self.token

    def get_openid_configuration(self) -> dict[str, Any]:
        url = self.configuration_url
        self.fetchable(url, "openid_configuration")
        try:
            with self.get_request_session() as session:
                response = session.get(url, headers={"Accept": "application/json"})
        except requests.RequestException as e:
            raise RegistrationRefused(f"the platform's OpenID configuration could not be read ({e})") from None
        if not response.ok:
            raise RegistrationRefused(f"the platform's OpenID configuration answered {response.status_code}")
        try:
            configuration = response.json()
        except ValueError:
            raise RegistrationRefused("the platform's OpenID configuration is not JSON") from None
        self.check(configuration)
        return configuration

    def check(self, configuration: Any) -> None:
        """What the tool needs of the platform, each refusal saying what is missing."""
        if not isinstance(configuration, dict):
            raise RegistrationRefused("the platform's OpenID configuration is not a JSON object")
        issuer = str(configuration.get("issuer") or "")
        if _origin(issuer) != _origin(self.configuration_url):
            raise RegistrationRefused(
                f"the configuration's issuer ({issuer or 'none'}) is not on the host it was read from "
                f"({urlsplit(self.configuration_url).netloc})"
            )
        for name in ("registration_endpoint", "authorization_endpoint", "token_endpoint", "jwks_uri"):
            self.fetchable(str(configuration.get(name) or ""), name)
        if "id_token" not in (configuration.get("response_types_supported") or ()):
            raise RegistrationRefused("the platform does not offer the id_token response type LTI launches use")
        if "RS256" not in (configuration.get("id_token_signing_alg_values_supported") or ()):
            raise RegistrationRefused("the platform does not sign id_tokens with RS256")
        lti = configuration.get(PLATFORM_CONFIGURATION)
        offered = {m.get("type") for m in (lti or {}).get("messages_supported") or () if isinstance(m, dict)}
        missing = [m for m in MESSAGES if m not in offered]
        if not isinstance(lti, dict) or missing:
            raise RegistrationRefused(
                f"the platform does not offer the LTI messages the tool uses: {', '.join(missing)}"
            )

    def fetchable(self, url: str, name: str) -> None:
        """Over https; plain http only to this machine, outside production (a platform on loopback)."""
        parts = urlsplit(url)
        if parts.scheme == "https" and parts.netloc:
            return
        if parts.scheme == "http" and parts.hostname in LOOPBACK and self.loopback_http:
            return
        raise RegistrationRefused(f"{name} must be an https URL, got {url or 'nothing'!r}")

    def complete_registration(self, configuration: dict[str, Any], registration: dict[str, Any]) -> Any:
        return configuration, registration


def registered(registrar: Registrar, platform: str) -> NewRegistration:
    """Register with the platform: what to store, or why not (nothing is stored by this call)."""
    try:
        configuration, answer = registrar.register()
    except LtiServiceException as e:
        raise RegistrationRefused(f"the platform refused the registration ({_reason(e.response)})") from None
    except (LtiException, requests.RequestException) as e:
        raise RegistrationRefused(f"the registration could not be sent ({e})") from None
    tool = answer.get(TOOL_CONFIGURATION) if isinstance(answer, dict) else None
    client_id = answer.get("client_id") if isinstance(answer, dict) else None
    deployment = tool.get("deployment_id") if isinstance(tool, dict) else None
    if not isinstance(client_id, str) or not client_id or not isinstance(deployment, str) or not deployment:
        raise RegistrationRefused("the platform's answer gives no client_id or no deployment_id")
    return NewRegistration(
        platform=platform,
        issuer=configuration["issuer"],
        client_id=client_id,
        deployment_ids=(deployment,),
        auth_login_url=configuration["authorization_endpoint"],
        auth_token_url=configuration["token_endpoint"],
        keyset_url=configuration["jwks_uri"],
        auth_audience=configuration.get("authorization_server"),
        registered_by="dynamic",
    )


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    try:
        port = parts.port or {"https": 443, "http": 80}.get(parts.scheme)
    except ValueError:  # a port that is not a number
        return "", "", None
    return parts.scheme, (parts.hostname or "").lower(), port


def _reason(response: Any) -> str:
    if response is None:
        return "no answer"
    try:
        body = response.json()
    except ValueError:
        body = {}
    said = body.get("error_description") or body.get("error") if isinstance(body, dict) else None
    return f"{response.status_code}" + (f": {str(said)[:200]}" if said else "")
