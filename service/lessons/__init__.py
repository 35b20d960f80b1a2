"""Lessons: markdown documents with front matter and directives, loaded once at start-up."""

from __future__ import annotations

from .loader import LessonError, load_lessons
from .model import Block, Checkpoint, Lesson

__all__ = ["Block", "Checkpoint", "Lesson", "LessonError", "init_app", "load_lessons"]


def init_app(app) -> dict[str, Lesson]:
    lessons = load_lessons(app.extensions["settings"].content_dir)
    app.extensions["lessons"] = lessons
    return lessons
