"""Load content/lessons/*.md: YAML front matter + markdown with `:::directive{attrs}` blocks; a
malformed file raises LessonError naming the file and line (`create_app` lets it stop start-up)."""

from __future__ import annotations

import html
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml
from markdown_it import MarkdownIt
from mdit_py_plugins.container import container_plugin
from mdit_py_plugins.front_matter import front_matter_plugin

from ..compute.failure_modes import REGISTRY
from ..i18n import translate
from .items import PHASES, ItemError, parse_items
from .model import COMPLETIONS, REQUIREMENTS, Block, Checkpoint, Lesson
from .notation import soft_break, text_with_subscripts
from .prediction import PREDICTIONS

# directive -> (required attributes, optional attributes)
DIRECTIVES: dict[str, tuple[set[str], set[str]]] = {
    "predict": ({"checkpoint"}, set()),
    "answer": ({"checkpoint"}, set()),
    "explorable": ({"id", "checkpoint", "src", "title"}, {"height"}),
    # command: the TypeScript track's test command (the seed's); python: the Python track's
    "exercise": ({"checkpoint", "path", "command", "title"}, {"python"}),
    "explain": ({"checkpoint"}, set()),
    "self-check": (set(), set()),
    "failure-modes": ({"ids"}, {"explorable"}),  # a list drawn from the failure-mode registry
    "items": ({"phase"}, set()),  # where the front matter's items of one phase are asked
}
_ATTR = re.compile(r'([A-Za-z][\w-]*)="([^"]*)"')
_OPEN = re.compile(r"^:::\s*([A-Za-z][\w-]*)(\{.*\})?\s*$")
_CLOSE = re.compile(r"^:::\s*$")
_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")


class LessonError(ValueError):
    def __init__(self, path: Path | str, line: int, message: str):
        super().__init__(f"{path}:{line}: {message}")
        self.path = str(path)
        self.line = line


def markdown_renderer() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.use(front_matter_plugin)
    for name in DIRECTIVES:
        md.use(container_plugin, name=name, validate=_validator(name), render=_renderer(name))
    md.enable("table")
    md.add_render_rule("text", text_with_subscripts)
    md.add_render_rule("softbreak", soft_break)
    return md


def _renderer(name: str):
    def render(self, tokens, idx, options, env):
        token = tokens[idx]
        if token.nesting == 1:
            line = token.map[0] + 1 if token.map else 0
            if name == "failure-modes":
                env["failure_modes"] = dict(_ATTR.findall(token.info))
            return f'<section class="directive directive-{name}" data-line="{line}">\n'
        if name == "failure-modes":
            return _failure_mode_list(env.pop("failure_modes", {}), env.get("locale", "en")) + "</section>\n"
        return "</section>\n"

    return render


WORKBENCH = "/explorables/multi-head-attention"
SHOWN_WITH = {"output": "&amp;wo=learned", "mask": "&amp;causal=1"}  # a step's bug -> the settings that show it


def _failure_mode_list(attrs: dict[str, str], locale: str) -> str:
    """The registry's names and descriptions (one source for the engine, the checker and the
    lesson) in the lesson's language, each linking to the workbench comparing it with the
    correct implementation."""
    page = attrs.get("explorable", WORKBENCH)
    items = []
    for mode_id in (i.strip() for i in attrs.get("ids", "").split(",") if i.strip()):
        mode = REGISTRY[mode_id]
        # What the bug needs to show: skipping W_O changes nothing while W_O is the identity (the
        # link opens a mixing one), a broken mask nothing while the mask is off (it turns it on).
        shown_with = SHOWN_WITH.get(mode.step, "") if page == WORKBENCH else ""
        href = f"{html.escape(page)}#compare={mode.id}{shown_with}"
        link = f'<a href="{href}" data-failure-mode="{mode.id}">{html.escape(translate(mode.name, locale))}</a>'
        colon, stop = ("：", "。") if locale.startswith("zh") else (": ", ".")
        items.append(f"<li>{link}{colon}{html.escape(translate(mode.description, locale))}{stop}</li>")
    return '<ul class="failure-modes">\n' + "\n".join(items) + "\n</ul>\n"


def _validator(name: str):
    def validate(params: str, *args: Any) -> bool:
        return params.strip().split("{", 1)[0].strip() == name

    return validate


def load_lessons(directory: str | Path) -> dict[str, Lesson]:
    directory = Path(directory)
    if not directory.is_dir():
        raise LessonError(directory, 0, "lesson directory does not exist")
    lessons: dict[str, Lesson] = {}
    for path in sorted(directory.glob("*.md")):
        lesson = load_lesson(path)
        if lesson.id in lessons:
            raise LessonError(path, 1, f"lesson id {lesson.id!r} is also used by {lessons[lesson.id].source}")
        lessons[lesson.id] = lesson
    for lesson_id, lesson in lessons.items():  # a prerequisite in this catalog reads as that lesson's title
        present = tuple(p in lessons for p in lesson.prerequisites)
        titles = tuple(
            lessons[p].title if here else title
            for p, title, here in zip(lesson.prerequisites, lesson.prerequisite_titles, present, strict=True)
        )
        lessons[lesson_id] = replace(lesson, prerequisite_titles=titles, prerequisites_present=present)
    return dict(sorted(lessons.items(), key=lambda item: (item[1].order, item[0])))


def load_lesson(path: Path, locale: str = "en") -> Lesson:
    text = path.read_text(encoding="utf-8")
    _check_directive_nesting(path, text)
    md = markdown_renderer()
    tokens = md.parse(text)
    if not tokens or tokens[0].type != "front_matter":
        raise LessonError(path, 1, "a lesson starts with YAML front matter between --- lines")
    meta = _front_matter(path, tokens[0].content)
    body_start = tokens[0].map[1] if tokens[0].map else 0
    markdown = "\n".join(text.splitlines()[body_start:]).strip() + "\n"
    checkpoints = _checkpoints(path, meta, _line_of(tokens[0].content, "checkpoints"))
    blocks = _blocks(path, md, tokens, {c.id for c in checkpoints}, locale)
    _check_blocks_cover_checkpoints(path, checkpoints, blocks)
    try:
        items = parse_items(meta.get("items"))
    except ItemError as error:
        raise LessonError(path, _line_of(tokens[0].content, "items"), str(error)) from None
    _check_items_are_asked(path, items, blocks)
    prerequisites = [_prerequisite(path, entry) for entry in meta.get("prerequisites") or ()]
    html = md.renderer.render(tokens[1:], md.options, {"locale": locale})
    return Lesson(
        id=meta["id"],
        title=meta["title"],
        order=meta["order"],
        summary=meta.get("summary", ""),
        objectives=tuple(meta["objectives"]),
        prerequisites=tuple(p["id"] for p in prerequisites),
        prerequisite_titles=tuple(p["title"] for p in prerequisites),
        checkpoints=tuple(checkpoints),
        markdown=markdown,
        html=html,
        blocks=tuple(blocks),
        source=str(path),
        items=items,
    )


def _check_directive_nesting(path: Path, text: str) -> None:
    open_line: tuple[int, str] | None = None
    in_fence = False
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("```"):
            in_fence = not in_fence
        if in_fence:
            continue
        opening = _OPEN.match(line)
        if opening:
            name = opening.group(1)
            if name not in DIRECTIVES:
                raise LessonError(path, number, f"unknown directive :::{name}; known: {sorted(DIRECTIVES)}")
            if open_line:
                raise LessonError(path, number, f":::{name} opens inside :::{open_line[1]} from line {open_line[0]}")
            open_line = (number, name)
        elif _CLOSE.match(line):
            if not open_line:
                raise LessonError(path, number, "::: closes a directive that was never opened")
            open_line = None
        elif line.startswith(":::"):
            raise LessonError(path, number, f"malformed directive line {line!r}")
    if open_line:
        raise LessonError(path, open_line[0], f":::{open_line[1]} is never closed")


SAFE = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's, where PyYAML was built with it: 10x faster


def _front_matter(path: Path, content: str) -> dict[str, Any]:
    try:
        meta = yaml.load(content, Loader=SAFE) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 2 if mark is not None else 1
        raise LessonError(path, line, f"front matter is not valid YAML: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(meta, dict):
        raise LessonError(path, 2, "front matter must be a mapping")
    for key, kind in (("id", str), ("title", str), ("order", int), ("objectives", list), ("checkpoints", list)):
        if not isinstance(meta.get(key), kind) or isinstance(meta.get(key), bool):
            raise LessonError(path, _line_of(content, key), f"front matter needs {key!r} ({kind.__name__})")
    if not _ID.match(meta["id"]):
        raise LessonError(path, _line_of(content, "id"), f"lesson id {meta['id']!r} must be lowercase-with-dashes")
    return meta


def _line_of(front_matter: str, key: str) -> int:
    for number, line in enumerate(front_matter.splitlines(), start=2):
        if line.lstrip("- ").startswith(f"{key}:"):
            return number
    return 2


def _text_rule(path: Path, line: int, raw: dict[str, Any], requires: Any) -> tuple[Any, int, str]:
    """A text checkpoint's rule for earning its completion: (vocabulary by language, min_words, expects)."""
    vocabulary, min_words, expects = raw.get("vocabulary") or {}, raw.get("min_words") or 0, raw.get("expects") or ""
    if (vocabulary or min_words or expects) and requires != "text":
        raise LessonError(path, line, f"checkpoint {raw['id']!r}: only text checkpoints set vocabulary, min_words")
    if expects not in ("", "number"):
        raise LessonError(path, line, f"checkpoint {raw['id']!r}: expects is number (a prediction that is a number)")
    words = vocabulary.values() if isinstance(vocabulary, dict) else [None]
    if not all(isinstance(ws, list) and all(isinstance(w, str) and w.strip() for w in ws) for ws in words):
        raise LessonError(path, line, f"checkpoint {raw['id']!r}: vocabulary maps each language to a list of words")
    if not isinstance(min_words, int) or isinstance(min_words, bool) or min_words < 0:
        raise LessonError(path, line, f"checkpoint {raw['id']!r}: min_words is a whole number")
    return tuple((str(tag), tuple(ws)) for tag, ws in vocabulary.items()), min_words, expects


def _manipulations(path: Path, line: int, raw: dict[str, Any], completion: Any) -> list[str]:
    """An explorable-event checkpoint's manipulations: lowercase-with-dashes ids, each once."""
    manipulations = raw.get("manipulations") or []
    if completion != "explorable-event" and manipulations:
        raise LessonError(path, line, f"checkpoint {raw['id']!r}: only explorable-event checkpoints list manipulations")
    if not (isinstance(manipulations, list) and all(isinstance(m, str) and _ID.fullmatch(m) for m in manipulations)):
        raise LessonError(path, line, f"checkpoint {raw['id']!r}: manipulations are lowercase-with-dashes ids")
    if len(set(manipulations)) != len(manipulations):
        raise LessonError(path, line, f"checkpoint {raw['id']!r}: a manipulation is listed twice")
    return manipulations


def _checkpoints(path: Path, meta: dict[str, Any], line: int) -> list[Checkpoint]:
    result: list[Checkpoint] = []
    for raw in meta["checkpoints"]:
        if not isinstance(raw, dict) or not isinstance(raw.get("id"), str) or not _ID.match(raw["id"]):
            raise LessonError(path, line, f"checkpoint needs an id of lowercase-with-dashes: {raw!r}")
        completion = raw.get("completion")
        if completion not in COMPLETIONS:
            raise LessonError(path, line, f"checkpoint {raw['id']!r}: completion must be one of {COMPLETIONS}")
        if completion == "explorable-event" and not (raw.get("instanceId") and raw.get("event")):
            raise LessonError(path, line, f"checkpoint {raw['id']!r}: explorable-event needs instanceId and event")
        requires = raw.get("requires")
        if completion == "learner" and requires not in REQUIREMENTS:
            raise LessonError(path, line, f"checkpoint {raw['id']!r}: requires must be one of {REQUIREMENTS}")
        manipulations = _manipulations(path, line, raw, completion)
        if raw.get("prediction") is not None and (completion != "learner" or raw["prediction"] not in PREDICTIONS):
            raise LessonError(
                path,
                line,
                f"checkpoint {raw['id']!r}: a learner checkpoint's prediction is one of {sorted(PREDICTIONS)}",
            )
        vocabulary, min_words, expects = _text_rule(path, line, raw, requires)
        if any(c.id == raw["id"] for c in result):
            raise LessonError(path, line, f"checkpoint id {raw['id']!r} appears twice")
        result.append(
            Checkpoint(
                id=raw["id"],
                title=str(raw.get("title") or raw["id"]),
                completion=completion,
                requires=requires,
                instance_id=raw.get("instanceId"),
                event=raw.get("event"),
                manipulations=tuple(manipulations),
                prediction=raw.get("prediction"),
                vocabulary=vocabulary,
                min_words=min_words,
                expects=expects,
            )
        )
    if not result:
        raise LessonError(path, 2, "a lesson needs at least one checkpoint")
    return result


def _blocks(path: Path, md: MarkdownIt, tokens: list, checkpoint_ids: set[str], locale: str) -> list[Block]:
    blocks: list[Block] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.type.startswith("container_") and token.type.endswith("_open"):
            name = token.type[len("container_") : -len("_open")]
            line = token.map[0] + 1 if token.map else 0
            attrs = _attributes(path, line, name, token.info)
            depth, j = 1, i + 1
            while depth:
                if tokens[j].type == token.type:
                    depth += 1
                elif tokens[j].type == f"container_{name}_close":
                    depth -= 1
                j += 1
            inner = tokens[i + 1 : j - 1]
            checkpoint = attrs.get("checkpoint")
            if checkpoint is not None and checkpoint not in checkpoint_ids:
                raise LessonError(path, line, f":::{name} names checkpoint {checkpoint!r}, not in the front matter")
            items, answers = _questions(inner) if name == "self-check" else ((), ())
            source = "\n".join(t.content for t in inner if t.type == "inline")
            blocks.append(
                Block(
                    kind=name,
                    attrs=attrs,
                    markdown=source,
                    line=line,
                    html=md.renderer.render(inner, md.options, {"locale": locale}),
                    items=items,
                    answers=answers,
                )
            )
            i = j
        else:
            i += 1
    return blocks


def _attributes(path: Path, line: int, name: str, info: str) -> dict[str, str]:
    rest = info.strip()[len(name) :].strip()
    attrs: dict[str, str] = {}
    if rest:
        if not (rest.startswith("{") and rest.endswith("}")):
            raise LessonError(path, line, f':::{name} attributes must be written {{key="value" ...}}')
        inside = rest[1:-1]
        attrs = dict(_ATTR.findall(inside))
        if _ATTR.sub("", inside).strip():
            raise LessonError(path, line, f":::{name} has malformed attributes: {inside!r}")
    required, optional = DIRECTIVES[name]
    if name == "failure-modes":
        unknown_ids = [i.strip() for i in attrs.get("ids", "").split(",") if i.strip() not in REGISTRY]
        if unknown_ids:
            raise LessonError(path, line, f":::failure-modes names unknown failure modes {unknown_ids}")
    missing = required - set(attrs)
    unknown = set(attrs) - required - optional
    if missing:
        raise LessonError(path, line, f":::{name} is missing {sorted(missing)}")
    if unknown:
        raise LessonError(path, line, f":::{name} has unknown attributes {sorted(unknown)}")
    return attrs


def _check_blocks_cover_checkpoints(path: Path, checkpoints: list[Checkpoint], blocks: list[Block]) -> None:
    for cp in checkpoints:
        if cp.completion == "explorable-event" and not any(
            b.kind == "explorable" and b.attrs.get("id") == cp.instance_id for b in blocks
        ):
            raise LessonError(
                path,
                1,
                f"checkpoint {cp.id!r} waits for explorable {cp.instance_id!r}, but no :::explorable has that id",
            )


def _check_items_are_asked(path: Path, items: tuple, blocks: list[Block]) -> None:
    """Each phase with items has an :::items block asking them, and each such block has items."""
    asked = {b.attrs["phase"]: b.line for b in blocks if b.kind == "items"}
    for phase, line in asked.items():
        if phase not in PHASES:
            raise LessonError(path, line, f":::items phase {phase!r} is one of {', '.join(PHASES)}")
        if not any(i.asked_in(phase) for i in items):
            raise LessonError(path, line, f":::items{{phase={phase!r}}} asks no item: the front matter has none")
    for item in items:
        missing = [p for p in PHASES if item.asked_in(p) and p not in asked]
        if missing:
            raise LessonError(
                path, 1, f"item {item.id!r} is asked {missing[0]}, but no :::items{{phase={missing[0]!r}}}"
            )


def _questions(tokens: list) -> tuple[tuple[str, ...], tuple[str | None, ...]]:
    """A self-check's questions (the list's items) and each one's model answer (the text of an
    item nested under it, None where none is written)."""
    questions: list[str] = []
    answers: list[str | None] = []
    depth = 0
    for t in tokens:
        if t.type == "bullet_list_open":
            depth += 1
        elif t.type == "bullet_list_close":
            depth -= 1
        elif t.type == "inline" and depth == 1:
            questions.append(t.content)
            answers.append(None)
        elif t.type == "inline" and depth == 2 and questions:
            answers[-1] = t.content if answers[-1] is None else f"{answers[-1]} {t.content}"
    return tuple(questions), tuple(answers)


def _prerequisite(path: Path, entry: Any) -> dict[str, str]:
    """A prerequisite: a lesson id, or {id, title} where the lesson is not in this catalog."""
    if isinstance(entry, str):
        return {"id": entry, "title": entry.replace("-", " ").capitalize()}
    if isinstance(entry, dict) and isinstance(entry.get("id"), str) and isinstance(entry.get("title"), str):
        return {"id": entry["id"], "title": entry["title"]}
    raise LessonError(path, 1, f"a prerequisite is a lesson id or {{id, title}}, not {entry!r}")
