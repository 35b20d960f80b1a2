"""`GET /lessons` and `GET /lessons/{id}`: metadata, completion rules, markdown, HTML, blocks."""

from .helpers import LESSON


def test_the_list_holds_every_lesson_with_its_checkpoints(client):
    lessons = client.get("/api/v1/lessons").json["lessons"]
    in_order = [
        LESSON,
        "kv-cache-and-latent-attention",
        "long-context",
        "online-softmax",
        "rope-scaling",
        "inside-the-model",
        "speculative-decoding",
    ]
    assert [lesson["id"] for lesson in lessons] == in_order
    assert [lesson["order"] for lesson in lessons] == list(range(1, len(in_order) + 1))  # "Lesson 1" is the first
    with_an_exercise = {LESSON, "online-softmax"}  # each exercise's challenge completes its lesson's implement
    for lesson in lessons:
        implement = ["implement"] if lesson["id"] in with_an_exercise else []
        assert [c["id"] for c in lesson["checkpoints"]] == ["predict", "experiment", *implement, "explain"]
    prerequisites = {lesson["id"]: lesson["prerequisites"] for lesson in lessons[1:]}
    assert prerequisites == {
        "kv-cache-and-latent-attention": [LESSON],
        "online-softmax": [LESSON],
        "long-context": ["kv-cache-and-latent-attention"],
        "rope-scaling": ["long-context"],
        "inside-the-model": [LESSON],
        "speculative-decoding": ["kv-cache-and-latent-attention"],
    }
    assert "html" not in lessons[0] and "markdown" not in lessons[0] and "items" not in lessons[0]  # stays small


def test_the_detail_holds_the_lesson_and_its_blocks(client):
    detail = client.get(f"/api/v1/lessons/{LESSON}").json
    assert detail["objectives"] and detail["prerequisites"]
    assert {b["kind"] for b in detail["blocks"]} == {
        "predict",
        "answer",
        "explorable",
        "exercise",
        "explain",
        "items",
        "failure-modes",
    }
    assert detail["html"].startswith("<h1>")
    assert "features 1–2" in detail["markdown"] and "features 0–1" not in detail["markdown"]  # people count from 1
    assert [b["phase"] for b in detail["blocks"] if b["kind"] == "items"] == ["pre", "post"]
    # the items to ask, without their keys: the answer and the misconceptions come after answering
    assert len(detail["items"]) >= 8 and all("answer" not in i for i in detail["items"])
    assert all(set(c) == {"id", "text"} for i in detail["items"] for c in i.get("choices", []))


def test_completion_rules_say_what_completes_each_checkpoint(client):
    rules = {c["id"]: c for c in client.get(f"/api/v1/lessons/{LESSON}").json["checkpoints"]}
    assert rules["experiment"]["on"] == {"event": "parameter-changed", "instance_id": "multi-head-workbench"}
    assert rules["predict"]["requires"] == "text" and rules["explain"]["requires"] == "text"
    assert rules["implement"]["requires"] == "passing-tests"
    assert rules["implement"]["on"] == {"event": "completed", "checkpoint": "implement"}


def test_raw_html_in_the_markdown_is_not_passed_through(client):
    html = client.get(f"/api/v1/lessons/{LESSON}").json["html"]
    assert "<script" not in html


def test_an_unknown_lesson_is_a_problem_404(client):
    response = client.get("/api/v1/lessons/nope")
    assert response.status_code == 404 and response.content_type == "application/problem+json"


def test_the_lessons_failure_modes_come_from_the_registry(client):
    html = client.get(f"/api/v1/lessons/{LESSON}").json["html"]
    registry = client.get("/api/v1/failure-modes").json["failure_modes"]
    listed = [m for m in registry if f'data-failure-mode="{m["id"]}"' in html]
    assert len(listed) == 7
    for mode in listed:
        assert f">{mode['name']}</a>: {mode['description']}." in html.replace("&#x27;", "'")
        # Each link shows its bug: skipping W_O changes nothing while W_O is the identity (that link
        # opens a mixing one), a broken mask nothing while the mask is off (that link turns it on).
        extra = {"output": "&amp;wo=learned", "mask": "&amp;causal=1"}.get(mode["step"], "")
        assert f'href="/explorables/multi-head-attention#compare={mode["id"]}{extra}"' in html
