"""The lesson loader: the seed lesson as objects, and malformed files stopped with file and line."""

from pathlib import Path

import pytest

from service.app import create_app
from service.lessons import LessonError, load_lessons


@pytest.fixture(scope="module")
def lesson():
    return load_lessons("content/lessons")["multi-head-attention"]


def test_front_matter_matches_the_seed(lesson):
    assert lesson.title == "Multi-head attention" and lesson.order == 1
    assert lesson.prerequisites == ("embeddings-positional-information", "self-attention")
    assert len(lesson.objectives) == 3
    assert [c.id for c in lesson.checkpoints] == ["predict", "experiment", "implement", "explain"]
    assert [c.completion for c in lesson.checkpoints] == ["learner", "explorable-event", "learner", "learner"]
    experiment = lesson.checkpoint("experiment")
    assert (experiment.instance_id, experiment.event) == ("multi-head-workbench", "parameter-changed")


def test_blocks_point_at_this_products_workbench_and_exercise(lesson):
    kinds = [b.kind for b in lesson.blocks]
    assert kinds == [
        "items",
        "predict",
        "answer",
        "explorable",
        "exercise",
        "failure-modes",
        "explain",
        "answer",
        "items",
    ]
    explorable = next(b for b in lesson.blocks if b.kind == "explorable")
    assert explorable.attrs["src"] == "/explorables/multi-head-attention"
    assert explorable.attrs["id"] == "multi-head-workbench" and explorable.attrs["height"] == "850"
    exercise = next(b for b in lesson.blocks if b.kind == "exercise")
    assert exercise.attrs["command"] == (
        "pnpm exec vitest run exercises/multi-head-attention/tests --config vitest.exercise.config.ts"
    )  # the seed's, word for word
    assert exercise.attrs["python"] == "pytest exercises/multi-head-attention/tests"
    assert [b.attrs["phase"] for b in lesson.blocks if b.kind == "items"] == ["pre", "post"]
    assert lesson.checkpoint("predict").prediction == "heads-moved-by-last-two"


def test_prerequisites_are_ids_with_titles(lesson, tmp_path):
    assert lesson.prerequisites == ("embeddings-positional-information", "self-attention")
    assert lesson.prerequisite_titles == ("Embeddings and positional information", "Self-attention")
    (tmp_path / "tiny.md").write_text(GOOD_FRONT.replace("order: 1", "order: 1\nprerequisites: [multi-head-attention]"))
    tiny = load_lessons(tmp_path)["tiny"]
    assert tiny.prerequisites == ("multi-head-attention",)
    assert tiny.prerequisite_titles == ("Multi head attention",) and tiny.prerequisites_present == (False,)
    (tmp_path / "mha.md").write_text(Path("content/lessons/multi-head-attention.md").read_text())
    both = load_lessons(tmp_path)
    assert both["tiny"].prerequisite_titles == ("Multi-head attention",)  # the catalog's own title
    assert both["tiny"].prerequisites_present == (True,)
    assert both["multi-head-attention"].prerequisites_present == (False, False)
    (tmp_path / "mha.md").unlink()
    (tmp_path / "tiny.md").write_text(GOOD_FRONT.replace("order: 1", "order: 1\nprerequisites: [{title: x}]"))
    with pytest.raises(LessonError, match="a prerequisite is a lesson id or"):
        load_lessons(tmp_path)


def test_a_question_without_a_model_answer_has_none(tmp_path):
    (tmp_path / "tiny.md").write_text(GOOD_FRONT + "\n:::self-check\n- One?\n  - Yes.\n- Two?\n:::\n")
    (checks,) = [b for b in load_lessons(tmp_path)["tiny"].blocks if b.kind == "self-check"]
    assert checks.items == ("One?", "Two?") and checks.answers == ("Yes.", None)


def test_completion_rules(lesson):
    assert lesson.completes("completed", "predict", None).id == "predict"
    assert lesson.completes("completed", "experiment", "multi-head-workbench") is None
    assert lesson.completes("attempted", "implement", None) is None
    # The experiment lists four manipulations: no single event completes it, each one advances it.
    assert lesson.checkpoint("experiment").manipulations == ("last-two", "first-two", "causal-mask", "broken-reuse")
    assert lesson.completes("parameter-changed", None, "multi-head-workbench") is None
    assert lesson.counts_towards("parameter-changed", "experiment", "multi-head-workbench").id == "experiment"
    advanced = lesson.advances("parameter-changed", None, "multi-head-workbench", {"manipulation": "causal-mask"})
    assert (advanced[0].id, advanced[1]) == ("experiment", "causal-mask")
    assert lesson.advances("parameter-changed", None, "multi-head-workbench", {"manipulation": "other"}) is None
    assert lesson.advances("parameter-changed", None, "another-explorable", {"manipulation": "causal-mask"}) is None


@pytest.mark.parametrize(
    "manipulations, message",
    [("[a, a]", "listed twice"), ("[Not-an-id]", "lowercase-with-dashes"), ('["x\\n"]', "lowercase-with-dashes")],
)
def test_manipulations_are_checked_when_the_lesson_loads(tmp_path, manipulations, message):
    from service.lessons import LessonError, load_lessons

    source = Path("content/lessons/multi-head-attention.md").read_text()
    bad = source.replace(
        "manipulations: [last-two, first-two, causal-mask, broken-reuse]", f"manipulations: {manipulations}"
    )
    (tmp_path / "lesson.md").write_text(bad)
    with pytest.raises(LessonError, match=message):
        load_lessons(tmp_path)


def test_html_is_rendered_and_raw_html_is_not_passed_through(lesson):
    assert "<h1>Multi-head attention</h1>" in lesson.html
    assert "<h2>Common failure modes</h2>" in lesson.html


GOOD_FRONT = """\
---
id: tiny
title: Tiny
order: 1
objectives: [one]
checkpoints:
  - id: predict
    title: Predict
    completion: learner
    requires: text
---
"""


@pytest.mark.parametrize(
    "text, line, message",
    [
        (GOOD_FRONT + '\n:::predict{checkpoint="predict"}\nhi\n', 13, "never closed"),
        (GOOD_FRONT + "\n:::wobble\nhi\n:::\n", 13, "unknown directive :::wobble"),
        (GOOD_FRONT + '\n:::predict{checkpoint="nope"}\nhi\n:::\n', 13, "names checkpoint 'nope'"),
        (GOOD_FRONT + '\n:::explorable{id="x"}\nhi\n:::\n', 13, "is missing"),
        (GOOD_FRONT + '\n:::predict{checkpoint="predict" color="red"}\nhi\n:::\n', 13, "unknown attributes"),
        (GOOD_FRONT + "\n:::\n", 13, "never opened"),
        (GOOD_FRONT.replace("order: 1", "order: one"), 4, "'order' (int)"),
        (GOOD_FRONT.replace("title: Tiny", "title: [unclosed"), 4, "not valid YAML"),
        (GOOD_FRONT.replace("completion: learner", "completion: whenever"), 6, "completion must be one of"),
        (GOOD_FRONT.replace("    requires: text\n", ""), 6, "requires must be one of"),
        ("# no front matter\n", 1, "YAML front matter"),
    ],
)
def test_malformed_lessons_name_the_file_and_line(tmp_path, text, line, message):
    path = tmp_path / "bad.md"
    path.write_text(text)
    with pytest.raises(LessonError) as info:
        load_lessons(tmp_path)
    assert str(info.value).startswith(f"{path}:{line}: "), str(info.value)
    assert message in str(info.value)


def test_a_malformed_lesson_stops_start_up(tmp_path):
    (tmp_path / "bad.md").write_text(GOOD_FRONT + "\n:::wobble\n:::\n")
    with pytest.raises(LessonError, match="bad.md:13"):
        create_app({"env": "testing", "content_dir": str(tmp_path)})


def test_explorable_checkpoints_need_their_explorable(tmp_path):
    text = GOOD_FRONT.replace(
        """  - id: predict
    title: Predict
    completion: learner
    requires: text""",
        """  - id: play
    title: Play
    completion: explorable-event
    instanceId: missing-widget
    event: parameter-changed""",
    )
    (tmp_path / "x.md").write_text(text)
    with pytest.raises(LessonError, match="no :::explorable has that id"):
        load_lessons(tmp_path)


def test_a_failure_modes_block_names_only_known_modes(tmp_path):
    from service.lessons import load_lessons
    from service.lessons.loader import LessonError

    source = (Path(__file__).resolve().parents[2] / "content" / "lessons" / "multi-head-attention.md").read_text()
    broken = source.replace('ids="interleaved_split,', 'ids="interleaved_splat,')
    (tmp_path / "lesson.md").write_text(broken)
    with pytest.raises(LessonError, match="unknown failure modes"):
        load_lessons(tmp_path)
