"""Translations of lessons (`content/lessons/<locale>/<id>.md`): each a whole lesson in its
language whose structure is the English one's; which are stale since their source changed."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

import yaml

from ..i18n import DEFAULT, LOCALES
from .loader import LessonError, load_lesson
from .model import Lesson


def structure(lesson: Lesson) -> tuple:
    """What a translation must keep exactly: ids, order, checkpoint rules, prerequisites, the
    items' ids, phases, choices and keys (their words are translated), and the
    directives in order with their attributes (their `title` is text, and may be translated)."""
    return (
        lesson.id,
        lesson.order,
        lesson.prerequisites,
        tuple(
            (c.id, c.completion, c.requires, c.instance_id, c.event, c.manipulations, c.prediction)
            for c in lesson.checkpoints
        ),
        tuple(i.structure() for i in lesson.items),
        tuple((b.kind, tuple(sorted((k, v) for k, v in b.attrs.items() if k != "title"))) for b in lesson.blocks),
    )


def source_digest(path: Path | str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def load_translations(
    directory: str | Path, lessons: dict[str, Lesson]
) -> tuple[dict[str, dict[str, Lesson]], list[str]]:
    """`<directory>/<locale>/<lesson id>.md` for every locale offered (service/i18n.py): each a
    whole lesson in that language whose structure is the English one's. Returns the translations
    ({lesson id: {locale: lesson}}) and what is wrong with the rest, which are left out (the
    English lesson is served instead): a translation that does not load, or changes the structure.
    A translation records `source_sha256`, the digest of the English file it was made from:
    `stale_translations` names those whose source changed since."""
    found: dict[str, dict[str, Lesson]] = {}
    problems: list[str] = []
    for locale in (code for code in LOCALES if code != DEFAULT):
        for path in sorted((Path(directory) / locale).glob("*.md")):
            english = lessons.get(path.stem)
            if english is None:
                problems.append(f"{path}: no English lesson {path.stem!r} to translate")
                continue
            try:
                translated = load_lesson(path, locale)
            except LessonError as error:
                problems.append(str(error))
                continue
            if structure(translated) != structure(english):
                problems.append(f"{path}: its ids, checkpoints or directives differ from {english.source}'s")
                continue
            found.setdefault(english.id, {})[locale] = replace(
                translated,
                locale=locale,
                prerequisites_present=english.prerequisites_present,
                # what earns a text checkpoint is the English lesson's, in every language
                checkpoints=tuple(
                    replace(mine, vocabulary=its.vocabulary, min_words=its.min_words, expects=its.expects)
                    for mine, its in zip(translated.checkpoints, english.checkpoints, strict=True)
                ),
            )  # prerequisites' titles as the translation writes them
    return found, problems


def stale_translations(directory: str | Path, lessons: dict[str, Lesson]) -> list[str]:
    """Each translation whose English source changed after it was made (or that does not say
    what it was made from): to be translated again before it falls further behind."""
    stale = []
    for locale_dir in sorted(p for p in Path(directory).iterdir() if p.is_dir()):
        for path in sorted(locale_dir.glob("*.md")):
            english = lessons.get(path.stem)
            if english is None:
                continue
            recorded = yaml.safe_load(path.read_text(encoding="utf-8").split("---", 2)[1]).get("source_sha256")
            now = source_digest(english.source)
            if recorded != now:
                stale.append(f"{path}: made from {str(recorded)[:12]}, {english.source} is now {now[:12]}")
    return stale
