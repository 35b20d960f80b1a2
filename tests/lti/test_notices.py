"""LTI Platform Notification Service: a registered platform's signed notices, checked as a launch is,
acted on only when every notice of the batch holds. A user's data deleted on the platform erases the
learner here; a deployment removed refuses its further launches; anything else is acknowledged.
Forged, replayed, unsigned, expired or misaddressed notices refuse the batch and nothing is done."""

from __future__ import annotations

import datetime as dt
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import jwt
import pytest
from jwcrypto.jwk import JWK

from service.lti.notices import DEPLOYMENT_REMOVED, NOTICE, USER_DELETED

from .lms_server import LmsServer
from .platform import CLAIM
from .test_erasure import every_row
from .test_grades import complete, launch

pytestmark = pytest.mark.databases  # SQLite and PostgreSQL


def notice(platform, kind: str, **changes) -> dict:
    now = int(time.time())
    return {
        "iss": platform.issuer,
        "aud": platform.client_id,
        "iat": now,
        "exp": now + 300,
        "nonce": str(uuid.uuid4()),
        CLAIM + "version": "1.3.0",
        CLAIM + "deployment_id": platform.deployment,
        NOTICE: {"id": str(uuid.uuid4()), "timestamp": dt.datetime.now(dt.UTC).isoformat(), "type": kind},
        **changes,
    }


def post(client, *tokens: str):
    return client.post("/lti/notices", json={"notices": [{"jwt": t} for t in tokens]})


def test_a_users_data_deleted_on_the_platform_erases_the_learner_here(app, client, db, lms_server: LmsServer):
    learner = launch(client, lms_server, sub="grace-hopper-7")
    complete(client, learner, "predict")
    assert any(learner in row for _, row in every_row(db))
    platform = lms_server.platform
    answer = post(client, platform.id_token(notice(platform, USER_DELETED, sub="grace-hopper-7")))
    assert answer.status_code == 200, answer.json
    assert [n["done"] for n in answer.json["notices"]] == ["erased"]
    assert not any(learner in row for _, row in every_row(db))  # as DELETE /learners/{id} leaves it
    started = {
        "id": str(uuid.uuid4()),
        "lesson": "multi-head-attention",
        "event": "started",
        "occurred_at": "2026-12-04T10:00:00Z",
    }
    assert client.post("/api/v1/events", json=started).status_code == 401  # their cookie writes nothing more


def test_a_removed_deployment_launches_no_more_and_other_notices_are_acknowledged(client, lms_server: LmsServer):
    platform = lms_server.platform
    hello = post(client, platform.id_token(notice(platform, "LtiHelloWorldNotice")))
    assert hello.status_code == 200 and hello.json["notices"][0]["done"] == "acknowledged"
    launch(client, lms_server)  # launches from its deployment work
    removed = post(client, platform.id_token(notice(platform, DEPLOYMENT_REMOVED)))
    assert removed.status_code == 200 and removed.json["notices"][0]["done"] == "deployment removed"
    params = platform.login(client)
    refused = platform.launch(client, params["state"], platform.id_token(platform.claims(params["nonce"])))
    assert refused.status_code == 400 and "deployment" in refused.get_data(as_text=True)


def forged(platform) -> str:
    other = JWK.generate(kty="RSA", size=2048).export_to_pem(private_key=True, password=None)
    return jwt.encode(
        notice(platform, USER_DELETED, sub="user-42"), other, algorithm="RS256", headers={"kid": platform.kid}
    )


def unsigned(platform) -> str:
    return jwt.encode(notice(platform, USER_DELETED, sub="user-42"), None, algorithm="none")


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (forged, "Signature verification failed"),
        (unsigned, "RS256"),
        (lambda p: p.id_token(notice(p, USER_DELETED, sub="user-42", exp=int(time.time()) - 3600)), "expired"),
        (lambda p: p.id_token(notice(p, USER_DELETED, sub="user-42", iss="https://other.example")), "no platform"),
        (lambda p: p.id_token(notice(p, USER_DELETED, sub="user-42", aud="another-client")), "no platform"),
        (lambda p: p.id_token(notice(p, USER_DELETED, sub="user-42", **{CLAIM + "deployment_id": "x"})), "deployment"),
        (
            lambda p: p.id_token({k: v for k, v in notice(p, USER_DELETED, sub="user-42").items() if k != "nonce"}),
            "nonce",
        ),
        (lambda p: p.id_token(notice(p, USER_DELETED, sub="user-42", **{NOTICE: {"type": USER_DELETED}})), "its id"),
    ],
    ids=[
        "forged",
        "unsigned",
        "expired",
        "unknown-issuer",
        "other-audience",
        "other-deployment",
        "no-nonce",
        "no-notice-id",
    ],
)
def test_a_batch_with_one_bad_notice_is_refused_and_nothing_is_done(client, db, lms_server: LmsServer, make, words):
    learner = launch(client, lms_server)
    complete(client, learner, "predict")
    platform = lms_server.platform
    good = platform.id_token(notice(platform, USER_DELETED, sub="user-42"))
    answer = post(client, good, make(platform))
    assert answer.status_code == 401 and words in answer.json["detail"]
    assert answer.headers["Content-Type"].startswith("application/problem+json")
    assert any(learner in row for _, row in every_row(db))  # the good notice was not acted on either
    assert post(client, good).status_code == 200  # alone it is: its nonce was not spent by the refusal


def test_a_replayed_notice_is_refused(client, lms_server: LmsServer):
    platform = lms_server.platform
    token = platform.id_token(notice(platform, "LtiHelloWorldNotice"))
    assert post(client, token).status_code == 200
    again = post(client, token)
    assert again.status_code == 401 and "already received" in again.json["detail"]
    twice = platform.id_token(notice(platform, "LtiHelloWorldNotice"))
    assert post(client, twice, twice).status_code == 401  # the same notice twice in one batch


@pytest.mark.parametrize("body", [{}, {"notices": []}, {"notices": "x"}, [], {"notices": [{"jwt": "x"}] * 101}])
def test_a_malformed_batch_is_a_400_that_says_what_a_batch_is(client, lms_server, body):
    answer = client.post("/lti/notices", json=body)
    assert answer.status_code == 400 and '{"notices": [{"jwt": ...}, ...]}' in answer.json["detail"]


def test_concurrent_copies_of_a_notice_act_once(app, client, db, lms_server: LmsServer, monkeypatch):
    """Issue 66, L3: four copies sent at once: one 200, three "already received", the learner erased once."""
    from service.lti import views

    learner = launch(client, lms_server, sub="ada-lovelace-3")
    complete(client, learner, "predict")
    erased: list[str] = []
    real = views._erase
    monkeypatch.setattr(views, "_erase", lambda platform_id, who: (erased.append(who), real(platform_id, who)))
    platform = lms_server.platform
    token = platform.id_token(notice(platform, USER_DELETED, sub="ada-lovelace-3"))
    start = threading.Barrier(4)

    def send():
        start.wait()
        return post(app.test_client(), token)

    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda _: send(), range(4)))
    assert sorted(a.status_code for a in answers) == [200, 401, 401, 401]
    assert all("already received" in a.json["detail"] for a in answers if a.status_code == 401)
    assert erased == [learner] and not any(learner in row for _, row in every_row(db))


def test_a_notice_whose_exp_no_time_can_hold_is_refused_and_nothing_is_done(client, db, lms_server: LmsServer):
    """Issue 66, L3: exp past year 9999 (253402300810) answered 500 after erasing, and replayed forever."""
    learner = launch(client, lms_server, sub="katherine-johnson-5")
    complete(client, learner, "predict")
    platform = lms_server.platform
    far = platform.id_token(notice(platform, USER_DELETED, sub="katherine-johnson-5", exp=253402300810))
    answer = post(client, far)
    assert answer.status_code == 401 and "exp must be at most" in answer.json["detail"]
    assert any(learner in row for _, row in every_row(db))  # not erased
