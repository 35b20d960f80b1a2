"""Lessons: markdown documents with front matter and directives, loaded once at start-up."""

from __future__ import annotations

import functools
import logging
from dataclasses import replace
from pathlib import Path

from .loader import LessonError, load_lessons
from .model import Block, Checkpoint, Lesson
from .translations import load_translations

__all__ = ["Block", "Checkpoint", "Lesson", "LessonError", "init_app", "load_catalog", "load_lessons"]


def load_catalog(directory: str | Path) -> dict[str, Lesson]:
    """Every lesson with its translations (`Lesson.in_locale`). A translation that does not fit
    is left out with a warning: the English lesson is served in its place, never a broken page.
    Loaded once per process for the same files (their paths, sizes and times): lessons are frozen."""
    root = Path(directory).resolve()
    stamp = tuple(sorted((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in root.rglob("*.md")))
    return dict(_catalog(root, stamp))


@functools.lru_cache(maxsize=8)
def _catalog(directory: Path, stamp: tuple) -> dict[str, Lesson]:
    lessons = load_lessons(directory)
    translations, problems = load_translations(directory, lessons)
    for problem in problems:
        logging.getLogger("workbench.lessons").warning("translation left out: %s", problem)
    return {key: replace(lesson, translations=translations.get(key, {})) for key, lesson in lessons.items()}


def init_app(app) -> dict[str, Lesson]:
    lessons = load_catalog(app.extensions["settings"].content_dir)
    app.extensions["lessons"] = lessons
    return lessons
