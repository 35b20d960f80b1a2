"""API keys and principals: who is calling, for which platform, with which scopes. No Flask here."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
from dataclasses import dataclass

SCOPES = ("events:write", "progress:read", "analytics:read", "admin")
WEB_PLATFORM = "web"
WEB_SCOPES = frozenset({"events:write", "progress:read"})
KEY_PREFIX = "wb"


@dataclass(frozen=True)
class NewKey:
    prefix: str
    secret: str  # shown once, never stored

    @property
    def token(self) -> str:
        return f"{KEY_PREFIX}_{self.prefix}_{self.secret}"


@dataclass(frozen=True)
class Principal:
    """The caller: a platform's API key, or a browser learner of the `web` platform."""

    platform_id: int
    platform: str
    scopes: frozenset[str]
    learner: str | None = None  # set for browser sessions: they act for this learner only
    key_prefix: str | None = None

    def may_act_for(self, learner: str) -> bool:
        return self.learner is None or self.learner == learner


def new_key() -> NewKey:
    return NewKey(prefix=secrets.token_hex(4), secret=secrets.token_urlsafe(32))


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def parse_token(token: str) -> str | None:
    """The lookup prefix of a well-formed key, else None."""
    parts = token.split("_", 2)  # the secret itself may contain "_"
    if len(parts) != 3 or parts[0] != KEY_PREFIX or len(parts[1]) != 8 or len(parts[2]) < 32:
        return None
    return parts[1]


def token_matches(token: str, stored_hash: str) -> bool:
    return hmac.compare_digest(hash_token(token), stored_hash)


def parse_scopes(text: str) -> frozenset[str]:
    scopes = frozenset(s.strip() for s in text.split(",") if s.strip())
    unknown = scopes - set(SCOPES)
    if unknown or not scopes:
        raise ValueError(f"scopes must be a comma-separated subset of {', '.join(SCOPES)}; got {text!r}")
    return scopes


def new_learner_id() -> str:
    return "web-" + secrets.token_urlsafe(12)


def block_of(address: str) -> str:
    """The network an address belongs to, for fair shares and quotas: its /24 (IPv4) or /48 (IPv6)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return f"address:{address}"
    return "block:" + str(ipaddress.ip_network(f"{ip}/{24 if ip.version == 4 else 48}", strict=False))
