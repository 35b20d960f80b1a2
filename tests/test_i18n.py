"""The learner's language: an explicit choice (`?lang=`, kept in a cookie), then Accept-Language,
then English; the lesson comes back in it where translated, and says which it is in."""

from __future__ import annotations

import pytest

from service.i18n import COOKIE, supported

LESSON = "/api/v1/lessons/multi-head-attention"


@pytest.mark.parametrize(
    "tag, offered",
    [
        ("es", "es"), ("ES-mx", "es"), ("es_419", "es"), ("zh", "zh-CN"), ("zh-CN", "zh-CN"),
        ("zh-Hans", "zh-CN"), ("zh_SG", "zh-CN"), ("zh-TW", None), ("zh-Hant-HK", None), ("en-GB", "en"),
        ("fr", None), ("", None), (None, None), ("x" * 40, None),
    ],
)  # fmt: skip
def test_a_language_tag_is_the_locale_we_offer_for_it(tag, offered):
    assert supported(tag) == offered


def test_without_a_choice_the_lesson_is_english(client):
    response = client.get(LESSON)
    assert response.json["locale"] == "en" and response.json["title"] == "Multi-head attention"
    assert response.headers["Content-Language"] == "en"
    assert "Accept-Language" in response.headers["Vary"] and "Cookie" in response.headers["Vary"]


@pytest.mark.parametrize(
    "header, locale",
    [("es-ES,es;q=0.9,en;q=0.8", "es"), ("fr-FR,zh-CN;q=0.8,en;q=0.5", "zh-CN"), ("zh-TW,de;q=0.8", "en")],
)
def test_accept_language_picks_the_first_language_we_offer(client, header, locale):
    response = client.get(LESSON, headers={"Accept-Language": header})
    assert response.json["locale"] == locale and response.headers["Content-Language"] == locale


def test_an_explicit_choice_beats_the_browser_and_is_kept_in_a_cookie(client):
    chosen = client.get("/lessons/multi-head-attention?lang=zh-CN", headers={"Accept-Language": "es"})
    assert chosen.status_code == 200 and client.get_cookie(COOKIE).value == "zh-CN"
    later = client.get(LESSON, headers={"Accept-Language": "es"})  # the cookie, not the header
    assert later.json["locale"] == "zh-CN" and later.json["title"] == "多头注意力"
    assert client.get(LESSON + "?lang=es").json["title"] == "Atención multicabeza"  # ?lang= on any request


def test_a_language_we_do_not_offer_is_ignored_not_kept(client):
    response = client.get("/lessons/multi-head-attention?lang=klingon")
    assert response.status_code == 200 and client.get_cookie(COOKIE) is None
    assert client.get(LESSON + "?lang=klingon").json["locale"] == "en"


def test_the_translated_lesson_keeps_every_id_and_rule(client):
    english, spanish = client.get(LESSON).json, client.get(LESSON + "?lang=es").json
    assert [c["id"] for c in spanish["checkpoints"]] == [c["id"] for c in english["checkpoints"]]
    assert [{k: v for k, v in c.items() if k != "title"} for c in spanish["checkpoints"]] == [
        {k: v for k, v in c.items() if k != "title"} for c in english["checkpoints"]
    ]
    assert [(b["kind"], b.get("checkpoint")) for b in spanish["blocks"]] == [
        (b["kind"], b.get("checkpoint")) for b in english["blocks"]
    ]
    assert spanish["checkpoints"][0]["title"] == "Anota tu predicción"


def test_progress_is_kept_whatever_the_language(client):
    """A checkpoint completed while reading in Spanish is the same checkpoint."""
    learner = client.post("/api/v1/session").json["learner"]
    event = {
        "id": "00000000-0000-4000-8000-0000000000e5",
        "learner": learner,
        "lesson": "multi-head-attention",
        "checkpoint": "predict",
        "event": "completed",
        "occurred_at": "2026-12-01T10:00:00Z",
        "data": {"text": "dos características por cabeza"},
    }
    assert client.post("/api/v1/events?lang=es", json=event).status_code == 201
    progress = client.get(f"/api/v1/learners/{learner}/progress?lesson=multi-head-attention").json
    assert [c["id"] for c in progress["lessons"][0]["checkpoints"] if c["completed"]] == ["predict"]


def test_flask_babel_reads_each_request_in_the_same_locale(app):
    from flask_babel import get_locale

    with app.test_request_context("/", headers={"Accept-Language": "zh-CN"}):
        assert (get_locale().language, get_locale().script) == ("zh", "Hans")  # Simplified, as Babel spells it
    with app.test_request_context("/?lang=es", headers={"Accept-Language": "zh-CN"}):
        assert str(get_locale()) == "es"
