"""The learner's language: an explicit choice (`?lang=`, kept in a cookie), then Accept-Language,
then English; the lesson comes back in it where translated, and says which it is in."""

from __future__ import annotations

import pytest

from service.i18n import COOKIE, supported

LESSON = "/api/v1/lessons/multi-head-attention"


@pytest.mark.parametrize(
    "tag, offered",
    [
        ("es", "es"),
        ("ES-mx", "es"),
        ("es_419", "es"),
        ("zh", "zh-CN"),
        ("zh-CN", "zh-CN"),
        ("zh-Hans", "zh-CN"),
        ("zh_SG", "zh-CN"),
        ("zh-TW", None),
        ("zh-Hant-HK", None),
        ("en-GB", "en"),
        ("fr", None),
        ("", None),
        (None, None),
        ("x" * 40, None),
    ],
)
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


def test_pages_are_rendered_in_the_chosen_language_with_lang_and_dir(app, client):
    page = client.get("/explorables/multi-head-attention?lang=es").get_data(as_text=True)
    assert '<html lang="es" dir="ltr" data-catalog=' in page and "Máscara causal" in page and "Causal mask" not in page
    assert 'data-catalog="/static/i18n/es/workbench.json"' in page  # the page's scripts' words, fetched early
    assert 'rel="preload" href="/static/i18n/es/workbench.json"' in page
    chinese = app.test_client().get("/", headers={"Accept-Language": "zh-CN"})  # no cookie kept from ?lang=es
    assert '<html lang="zh-CN"' in chinese.get_data(as_text=True) and chinese.headers["Content-Language"] == "zh-CN"
    assert "Accept-Language" in chinese.headers["Vary"]
    english = app.test_client().get("/dashboard").get_data(as_text=True)
    assert '<html lang="en"' in english and "/static/i18n/" not in english


def test_every_page_has_the_language_menu_with_the_choice_selected(client):
    for path in (
        "/",
        "/lessons/multi-head-attention",
        "/explorables/multi-head-attention",
        "/figures/four-heads",
        "/explorables/trained-heads",
        "/dashboard",
    ):
        page = client.get(path + "?lang=zh-CN").get_data(as_text=True)
        assert '<option value="zh-CN" lang="zh-CN" selected>简体中文</option>' in page, path
        assert '<option value="en-XA"' not in page, path  # the pseudo-locale is for layout checks only


def test_a_problem_a_learner_meets_is_in_their_language_and_its_type_is_stable(client):
    missing = "/api/v1/exercises/multi-head-attention/challenges/" + "0" * 32
    english = client.get(missing).json
    spanish = client.get(missing, headers={"Accept-Language": "es"}).json
    assert (english["title"], english["detail"]) == ("Not Found", "no such challenge")
    assert (spanish["title"], spanish["detail"]) == ("No encontrado", "no existe ese desafío")
    assert spanish["type"] == english["type"] and spanish["status"] == 404
    long = client.post("/api/v1/models/bytes-2l-attn/attention?lang=zh-CN", json={"text": "é" * 100})
    assert long.status_code == 413 and long.json["title"] == "内容过大"
    assert long.json["detail"] == "文本的 UTF-8 编码有 200 个字节；bytes-2l-attn 最多读取 128 个"
    assert long.json["type"].endswith("/over-limit")


def test_an_edge_refusal_before_flask_is_in_the_requests_language(client):
    """The body limit is checked before any view runs: its problem is read in the same language."""
    response = client.post(
        "/api/v1/attention",
        data=b"{" * (5 * 1024 * 1024),
        headers={"Content-Type": "application/json", "Accept-Language": "es"},
    )
    assert response.status_code == 413 and response.json["title"] == "Entidad de la solicitud demasiado grande"
    assert response.json["detail"] == "el cuerpo de la solicitud supera el límite de 4194304 bytes"


def test_the_failure_modes_and_models_speak_the_readers_language(client):
    english = {m["id"]: m for m in client.get("/api/v1/failure-modes").json["failure_modes"]}
    chinese = client.get("/api/v1/failure-modes", headers={"Accept-Language": "zh-CN"})
    assert chinese.headers["Content-Language"] == "zh-CN"
    modes = {m["id"]: m for m in chinese.json["failure_modes"]}
    assert modes.keys() == english.keys() and modes["no_output_projection"]["name"] == "没有输出投影"
    assert all(modes[i]["name"] != english[i]["name"] for i in modes)
    model = client.get("/api/v1/models?lang=es").json["models"][0]
    assert model["description"].startswith("Un transformer de dos capas")
    english = client.get("/api/v1/models?lang=en").json["models"][0]
    assert model["layer_heads"][0][0]["label"] == english["layer_heads"][0][0]["label"]  # a label is data


def test_the_spanish_lesson_names_the_failure_modes_in_spanish(client):
    html = client.get("/api/v1/lessons/multi-head-attention?lang=es").json["html"]
    assert ">Sin proyección de salida</a>" in html and ">No output projection</a>" not in html


def test_the_learners_language_is_kept_with_their_progress_and_erased_with_them(app, client):
    """Pages start with POST /session: the language the learner reads in is kept then (once per
    change), shows in their progress, follows their next choice, and goes when they are erased."""
    from sqlalchemy import select

    from service.db.tables import LearnerLocale

    learner = client.post("/api/v1/session?lang=es").json["learner"]
    predicted = {
        "id": "00000000-0000-4000-8000-0000000000e6",
        "learner": learner,
        "lesson": "multi-head-attention",
        "checkpoint": "predict",
        "event": "completed",
        "occurred_at": "2026-12-01T10:00:00Z",
        "data": {"text": "Cada cabeza ve dos características."},
    }
    assert client.post("/api/v1/events", json=predicted).status_code == 201
    progress = f"/api/v1/learners/{learner}/progress"
    assert client.get(progress).json["locale"] == "es"
    client.post("/api/v1/session", headers={"Accept-Language": "zh-CN"})  # the cookie still says es
    assert client.get(progress).json["locale"] == "es"
    client.post("/api/v1/session?lang=zh-CN")
    assert client.get(progress).json["locale"] == "zh-CN"
    assert client.delete(f"/api/v1/learners/{learner}").status_code == 200
    with app.extensions["db"].read() as session:
        assert session.scalars(select(LearnerLocale).where(LearnerLocale.learner == learner)).all() == []
