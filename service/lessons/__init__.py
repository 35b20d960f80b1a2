"""Lessons: markdown documents with front matter and directives, loaded once at start-up."""

from __future__ import annotations

import logging
from pathlib import Path

from .loader import LessonError, load_lessons, load_translations
from .model import Block, Checkpoint, Lesson

__all__ = ["Block", "Checkpoint", "Lesson", "LessonError", "in_locale", "init_app", "load_lessons"]


def init_app(app) -> dict[str, Lesson]:
    directory = Path(app.extensions["settings"].content_dir)
    lessons = load_lessons(directory)
    app.extensions["lessons"] = lessons
    translations, problems = load_translations(directory, lessons)
    for problem in problems:  # the English lesson is served in its place: a page, never a broken one
        logging.getLogger("workbench.lessons").warning("translation left out: %s", problem)
    app.extensions["lesson_translations"] = translations
    return lessons


def in_locale(app, lesson: Lesson, locale: str) -> Lesson:
    """`lesson` in `locale` where it is translated, else as written (English)."""
    return app.extensions["lesson_translations"].get(lesson.id, {}).get(locale, lesson)
