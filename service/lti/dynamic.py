"""LTI Dynamic Registration 1.0 (https://www.imsglobal.org/spec/lti-dr/v1p0): the platform registers
the tool itself. An administrator runs `workbench lti invite` and pastes the URL it prints into the
platform ("Register a tool by URL" in Moodle 4.1+); the platform opens it with its
`openid_configuration` URL and a `registration_token`. The tool reads that configuration, checks it
(its issuer on the URL's host, the id_token response type, RS256, both LTI messages), posts its own
registration (pylti1p3's `DynamicRegistration` writes the body), and stores the client id and the
deployment the platform answers as `workbench lti register` would; the page then posts
`org.imsglobal.lti.close` to the platform's window (frontend/js/lti-close.js). An invitation is good
once, until it expires, and spent after a few failed attempts; a spent, expired or unknown one, a
configuration that does not hold, or a platform that refuses stores nothing.

Every fetch of the platform's (its configuration, the registration it answers) cannot reach inside: https
only (http to loopback outside production), the host's every address public (not private, loopback,
link-local as the cloud metadata address is, or reserved), no redirect followed, at most 64 KB read
within a 10-second deadline, and one message for every way it fails (what was read is never echoed)."""

from __future__ import annotations

import datetime as dt
import hashlib
import ipaddress
import json
import secrets
import socket
import time
from typing import Any
from urllib.parse import urlsplit

import requests
from pylti1p3.dynamic_registration import DynamicRegistration
from requests.adapters import HTTPAdapter
from sqlalchemy import delete
from sqlalchemy.orm import Session

from ..db.lti_tables import LtiValue
from .registrations import NewRegistration
from .tool import SCOPES, PatientSession, _aware

PLATFORM_CONFIGURATION = "https://purl.imsglobal.org/spec/lti-platform-configuration"
TOOL_CONFIGURATION = "https://purl.imsglobal.org/spec/lti-tool-configuration"
MESSAGES = ("LtiResourceLinkRequest", "LtiDeepLinkingRequest")
LOOPBACK = ("127.0.0.1", "localhost", "::1")
FAILURES = 3  # failed attempts an invitation allows before it is spent
LIMIT_BYTES = 64 * 1024  # a configuration or a registration answer, at most
DEADLINE_SECONDS = 10.0  # for one fetch, connecting and reading included
UNREADABLE = (
    "the platform's %s could not be read: it must answer 2xx with JSON over https, from a public address, "
    "without a redirect, within 10 s and 64 KB"
)  # one message for every way a fetch fails: what was read, or how it failed, is never echoed


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


def failed(session: Session, token: str) -> None:
    """An attempt that stored nothing: counted, and the invitation spent at the last one allowed."""
    row = session.get(LtiValue, _key(token)) if token else None
    if row is not None and row.value.get("failures", 0) + 1 >= FAILURES:
        session.delete(row)
    elif row is not None:
        row.value = {**row.value, "failures": row.value.get("failures", 0) + 1}


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

    def get_openid_configuration(self) -> dict[str, Any]:
        configuration = self.fetched("GET", self.configuration_url, "openid_configuration")
        self.check(configuration)
        return configuration

    def register(self) -> tuple[dict[str, Any], dict[str, Any]]:  # type: ignore[override]
        """The platform's configuration, checked, and its answer to this tool's registration."""
        configuration = self.get_openid_configuration()
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        answer = self.fetched(
            "POST",
            configuration["registration_endpoint"],
            "registration_endpoint",
            headers=headers,
            json=self.lti_registration_data(),
        )
        return configuration, answer

    def fetched(self, method: str, url: str, what: str, **kwargs: Any) -> Any:
        """A JSON document of the platform's, fetched as the module says, or one refusal for every failure."""
        self.fetchable(url, what)
        started = time.monotonic()
        headers = {"Accept": "application/json", "Accept-Encoding": "identity", **kwargs.pop("headers", {})}
        try:
            pinned = self.public(url, what)
            with self.get_request_session() as session:
                if pinned is not None:  # to the address checked, whatever a second lookup would answer
                    session.mount("https://", PinnedAdapter(urlsplit(url).hostname or ""))
                    headers["Host"], url = urlsplit(url).netloc, _at(url, pinned)
                response = session.request(method, url, headers=headers, allow_redirects=False, stream=True, **kwargs)
                with response:
                    body = b""
                    while chunk := response.raw.read1(4096):  # what has arrived: a drip is timed too
                        body += chunk
                        if len(body) > LIMIT_BYTES or time.monotonic() - started > DEADLINE_SECONDS:
                            raise RegistrationRefused(UNREADABLE % what)
            if not 200 <= response.status_code < 300:
                raise RegistrationRefused(UNREADABLE % what)
            return json.loads(body)
        except (requests.RequestException, OSError, ValueError):
            raise RegistrationRefused(UNREADABLE % what) from None

    def public(self, url: str, what: str) -> str | None:
        """Every address the host resolves to is public: the first, which the fetch connects to (DNS could
        answer an inside address to a second lookup); None for this machine (allowed outside production)."""
        parts = urlsplit(url)
        if self.loopback_http and parts.hostname in LOOPBACK:
            return None
        found = socket.getaddrinfo(parts.hostname, parts.port or 443, type=socket.SOCK_STREAM)
        for *_, address in found:
            ip = ipaddress.ip_address(address[0])
            ip = getattr(ip, "ipv4_mapped", None) or ip
            if not ip.is_global or ip.is_multicast:
                raise RegistrationRefused(UNREADABLE % what)
        return str(found[0][4][0])

    def check(self, configuration: Any) -> None:
        """What the tool needs of the platform, each refusal saying what is missing."""
        if not isinstance(configuration, dict):
            raise RegistrationRefused("the platform's OpenID configuration is not a JSON object")
        issuer = str(configuration.get("issuer") or "")
        if _origin(issuer) != _origin(self.configuration_url):
            where = urlsplit(self.configuration_url).netloc  # the issuer itself is not echoed: it failed
            raise RegistrationRefused(f"the configuration's issuer is not on the host it was read from ({where})")
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


class PinnedAdapter(HTTPAdapter):
    """https to an address already checked, named by its IP in the URL: TLS still sends and verifies the
    platform's host name (SNI, the certificate), and the Host header says it."""

    def __init__(self, hostname: str):
        self.hostname = hostname
        super().__init__()

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, server_hostname=self.hostname, assert_hostname=self.hostname, **kwargs)


def _at(url: str, address: str) -> str:
    """`url` with its host replaced by `address` (an IPv6 one in brackets), its port kept."""
    parts = urlsplit(url)
    host = f"[{address}]" if ":" in address else address
    return parts._replace(netloc=host + (f":{parts.port}" if parts.port else "")).geturl()


def registered(registrar: Registrar, platform: str) -> NewRegistration:
    """Register with the platform: what to store, or why not (nothing is stored by this call)."""
    configuration, answer = registrar.register()
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
