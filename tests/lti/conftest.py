"""A registered platform, played in process (`lms`) or running for real on loopback (`lms_server`)."""

from __future__ import annotations

import pytest

from service.lti.registrations import NewRegistration, register

from .lms_server import LmsServer
from .platform import Platform


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
