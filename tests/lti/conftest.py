"""A registered platform, played in process (`lms`) or running for real on loopback (`lms_server`)."""

from __future__ import annotations

import itertools

import pytest
from jwcrypto.jwk import JWK

from service.lti.registrations import NewRegistration, register

from .lms_server import LmsServer
from .platform import Platform

# 2048-bit RSA keys take a fifth of a second each, and every test makes two or three (a platform's,
# the tool's on first use): drawn from a pool of real keys made once per process, never the same
# key twice in a row, so a rotation still yields a new key and two platforms hold different ones.
POOL_SIZE = 12
_pool: list[str] = []
_drawn = itertools.count()
_generate = JWK.generate


def _pooled(**params):
    if params != {"kty": "RSA", "size": 2048}:
        return _generate(**params)
    if len(_pool) < POOL_SIZE:
        _pool.append(_generate(**params).export())
    return JWK.from_json(_pool[next(_drawn) % POOL_SIZE] if len(_pool) == POOL_SIZE else _pool[-1])


@pytest.fixture(autouse=True)
def pooled_rsa_keys(monkeypatch):
    monkeypatch.setattr(JWK, "generate", staticmethod(_pooled))


@pytest.fixture
def lms(app) -> Platform:
    platform = Platform()
    with app.extensions["db"].write() as session:
        register(session, NewRegistration(**platform.registration()))
    return platform


@pytest.fixture
def lms_server(app, client):
    with LmsServer(Platform()) as server:
        with app.extensions["db"].write() as session:
            register(session, NewRegistration(**server.registration()))
        server.tool_jwks = client.get("/lti/jwks").get_json()
        yield server
