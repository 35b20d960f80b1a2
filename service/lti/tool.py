"""pylti1p3 over our database: the tool configuration (registrations, deployments, the signing
key), where a launch's state and nonce wait between login and launch, and a launch validated
more strictly than the library's defaults (audience, azp, exp/iat with a small leeway, a nonce
that works once)."""

from __future__ import annotations

import datetime as dt
import hashlib
import typing as t

import jwt
import requests
from pylti1p3.contrib.flask import FlaskMessageLaunch, FlaskRequest, FlaskSessionService
from pylti1p3.deployment import Deployment
from pylti1p3.exception import LtiException
from pylti1p3.launch_data_storage.base import LaunchDataStorage
from pylti1p3.registration import Registration
from pylti1p3.tool_config.abstract import ToolConfAbstract
from sqlalchemy import delete

from ..db.engine import Database
from ..db.lti_tables import LtiRegistration, LtiValue
from . import keys, registrations

LEEWAY_SECONDS = 60  # clocks of platform and tool may differ this much
CLAIM = "https://purl.imsglobal.org/spec/lti/claim/"
MESSAGE_TYPES = ("LtiResourceLinkRequest", "LtiDeepLinkingRequest")


class ToolRegistration(Registration):
    """A registration that signs with the tool's current key and names it by our kid."""

    def __init__(self, row: LtiRegistration, signing: tuple[str, str]):
        super().__init__()
        self.row_id, self.platform_id = row.id, row.platform_id
        self.return_hosts = registrations.allowed_hosts(row)
        self.set_issuer(row.issuer).set_client_id(row.client_id).set_auth_login_url(row.auth_login_url)
        self.set_auth_token_url(row.auth_token_url).set_key_set(t.cast(t.Any, row.keyset)).set_key_set_url(
            row.keyset_url
        )
        if row.auth_audience:
            self.set_auth_audience(row.auth_audience)
        self._kid, pem = signing
        self.set_tool_private_key(pem)

    def get_kid(self) -> str | None:
        return self._kid


class DatabaseToolConf(ToolConfAbstract[FlaskRequest]):
    """Registrations as `workbench lti register` stored them: an issuer may have many client ids."""

    def __init__(self, db: Database):
        super().__init__()
        self.db = db

    def check_iss_has_one_client(self, iss: str) -> bool:
        return False

    def check_iss_has_many_clients(self, iss: str) -> bool:
        return True

    def find_registration_by_issuer(self, iss: str, *args, **kwargs) -> ToolRegistration:
        return self._registration(iss, None)

    def find_registration_by_params(self, iss: str, client_id: str, *args, **kwargs) -> ToolRegistration:
        return self._registration(iss, client_id)

    def _registration(self, iss: str, client_id: str | None) -> ToolRegistration:
        with self.db.read() as session:
            row = registrations.find(session, iss, client_id)
            if row is None:
                raise LtiException(f"no platform is registered with issuer {iss!r} and client id {client_id!r}")
            return ToolRegistration(row, keys.signing(self.db))

    def find_deployment(self, iss: str, deployment_id: str) -> Deployment | None:
        return self.find_deployment_by_params(iss, deployment_id, None)

    def find_deployment_by_params(self, iss: str, deployment_id: str, client_id: str | None, *args, **kwargs):
        with self.db.read() as session:
            row = registrations.find(session, iss, client_id)
            if row is None or deployment_id not in row.deployment_ids:
                return None
        return Deployment().set_deployment_id(deployment_id)


class DatabaseStorage(LaunchDataStorage[t.Any]):
    """pylti1p3's launch values in `lti_values`, with their expiry."""

    def __init__(self, db: Database):
        super().__init__()
        self.db = db

    def can_set_keys_expiration(self) -> bool:
        return True

    def get_value(self, key: str) -> t.Any:
        with self.db.read() as session:
            row = session.get(LtiValue, self._prepare_key(key))
            return row.value if row is not None and _aware(row.expires_at) > _now() else None

    def set_value(self, key: str, value: t.Any, exp: int | None = None) -> None:
        expires = _now() + dt.timedelta(seconds=exp or 3600)
        with self.db.write() as session:
            session.execute(delete(LtiValue).where(LtiValue.expires_at < _now()))  # what has expired goes
            session.merge(LtiValue(key=self._prepare_key(key), value=value, expires_at=expires))

    def check_value(self, key: str) -> bool:
        return self.get_value(key) is not None

    def take(self, key: str) -> bool:
        """Remove `key`; whether it was there and unexpired (only one caller can get True)."""
        with self.db.write() as session:
            gone = session.execute(
                delete(LtiValue).where(LtiValue.key == self._prepare_key(key), LtiValue.expires_at > _now())
            )
            return bool(gone.rowcount)  # type: ignore[attr-defined]


LOGIN_SECONDS = 600  # a login's state and nonce wait this long for their launch, then go


class SingleUseNonces(FlaskSessionService):
    """A login's nonce, bound to that login's state (so to the browser holding its state cookie),
    good for one launch whose signature verified. Nothing of a launch's claims is kept: a launch
    is answered within its request, names and e-mails are never stored."""

    data_storage: DatabaseStorage
    _launch_data_lifetime = LOGIN_SECONDS

    def bind(self, state: str, nonce: str) -> None:
        self._set_value(self._get_key("login", state), nonce)

    def bound_nonce(self, state: str) -> str | None:
        value = self._get_value(self._get_key("login", state))
        return value if isinstance(value, str) else None

    def consume(self, state: str) -> bool:
        """Take the login for its one launch (only one caller gets True)."""
        return self.data_storage.take(self._get_key("login", state))

    def save_nonce(self, nonce: str) -> None:
        """The library saves each nonce alone; here the login binds it to its state instead (bind)."""

    def check_nonce(self, nonce: str) -> bool:  # pragma: no cover: StrictLaunch checks the binding
        raise NotImplementedError("a nonce is checked with its state: StrictLaunch.validate_nonce")

    def save_launch_data(self, key: str, jwt_body) -> None:
        """Not kept: every use of the claims is within the launch's own request."""


def services(db: Database) -> tuple[FlaskRequest, DatabaseToolConf, SingleUseNonces]:
    request = FlaskRequest()
    session_service = SingleUseNonces(request)
    session_service.set_data_storage(DatabaseStorage(db))
    return request, DatabaseToolConf(db), session_service


class StrictLaunch(FlaskMessageLaunch):
    """The library's checks, plus the ones it leaves to the tool: the audience holds our client
    id (and azp names it when there are several), exp and iat are present and current; the nonce
    is the one this browser's login issued (bound to its state), and it is used up only by a
    launch whose signature verified, so a forged token cannot spend a real launch's nonce."""

    _session_service: SingleUseNonces

    def validate_nonce(self) -> StrictLaunch:
        nonce = self._get_jwt_body().get("nonce")
        if not isinstance(nonce, str) or not nonce:
            raise LtiException("the launch's id_token carries no nonce (a string)")
        if self._session_service.bound_nonce(self._get_request_param("state")) != nonce:
            raise LtiException(
                "the launch's id_token was not issued for the login this browser started (its nonce is another\u2019s, "
                "or the login expired): start the launch again from the course"
            )
        return self

    def validate_jwt_signature(self) -> StrictLaunch:
        public_key, algorithm = self.get_public_key()
        assert self._registration is not None
        client_id = self._registration.get_client_id()
        try:
            body = jwt.decode(
                self._get_id_token(),
                public_key,
                algorithms=[algorithm],
                audience=client_id,
                issuer=self._registration.get_issuer(),
                leeway=LEEWAY_SECONDS,
                options={"require": ["exp", "iat", "iss", "aud"]},
            )
        except jwt.InvalidTokenError as e:
            raise LtiException(f"the launch's id_token is not acceptable: {e}") from e
        if body["iat"] > _now().timestamp() + LEEWAY_SECONDS:
            raise LtiException("the launch's id_token was issued in the future")
        audiences = body["aud"] if isinstance(body["aud"], list) else [body["aud"]]
        if (len(audiences) > 1 or "azp" in body) and body.get("azp") != client_id:
            raise LtiException("the launch's id_token names another authorized party (azp)")
        if not self._session_service.consume(self._get_request_param("state")):
            raise LtiException("this login was already used for a launch: start the launch again from the course")
        return self

    def validate_message(self) -> StrictLaunch:
        kind = self._get_jwt_body().get(CLAIM + "message_type")
        if kind not in MESSAGE_TYPES:
            raise LtiException(f"this tool takes {' and '.join(MESSAGE_TYPES)} messages, not {kind!r}")
        well_formed(dict(self._get_jwt_body()))  # before the library's validators, which assume the shapes
        super().validate_message()
        return self


OBJECT_CLAIMS = (
    CLAIM + "resource_link",
    CLAIM + "context",
    CLAIM + "launch_presentation",
    "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint",
    "https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice",
    "https://purl.imsglobal.org/spec/lti-dl/claim/deep_linking_settings",
)
STRING_CLAIMS = ("sub", CLAIM + "target_link_uri", CLAIM + "deployment_id")


def well_formed(claims: dict) -> None:
    """The claims this tool reads have the shapes LTI 1.3 gives them, or the launch is refused
    saying which (a signed token can still carry a list where an object belongs)."""
    for name in OBJECT_CLAIMS:
        if name in claims and not isinstance(claims[name], dict):
            raise LtiException(f"the launch's {name.rsplit('/', 1)[-1]} claim must be an object")
    for name in STRING_CLAIMS:
        if name in claims and not isinstance(claims[name], str):
            raise LtiException(f"the launch's {name.rsplit('/', 1)[-1]} claim must be a string")
    link = claims.get(CLAIM + "resource_link", {})
    if "id" in link and not isinstance(link["id"], str):
        raise LtiException("the launch's resource_link id must be a string")
    endpoint = claims.get("https://purl.imsglobal.org/spec/lti-ags/claim/endpoint", {})
    for name in ("lineitem", "lineitems"):
        if name in endpoint and not isinstance(endpoint[name], str):
            raise LtiException(f"the launch's assignment and grade service {name} must be a URL (a string)")
    if not isinstance(claims.get(CLAIM + "roles", []), list):
        raise LtiException("the launch's roles claim must be a list")


def pseudonym(issuer: str, sub: str) -> str:
    """The learner id a platform's user gets here: stable across launches, not their name."""
    return "lti-" + hashlib.sha256(f"{issuer}\n{sub}".encode()).hexdigest()[:32]


SCOPES = (  # what the tool asks of a platform: grades, and an instructor's course's members
    "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem",
    "https://purl.imsglobal.org/spec/lti-ags/scope/score",
    "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly",
)


class PatientSession(requests.Session):
    """Fetches a platform's key set, giving up after a few seconds (a platform that does not
    answer must not hold a worker thread)."""

    TIMEOUT_SECONDS = 5.0

    def request(self, *args, **kwargs):
        kwargs.setdefault("timeout", self.TIMEOUT_SECONDS)
        return super().request(*args, **kwargs)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _aware(at: dt.datetime) -> dt.datetime:
    return at if at.tzinfo else at.replace(tzinfo=dt.UTC)
