"""`GET /lessons`, `GET /lessons/{id}`: metadata, checkpoints with rules, markdown, HTML, blocks."""

from __future__ import annotations

from flask import current_app
from flask.views import MethodView

from ..edge.problems import Problem
from .schemas.lessons import LessonListSchema, LessonSchema
from .smorest import Blueprint

blp = Blueprint("lessons", __name__, url_prefix="/api/v1/lessons", description="Lessons and their checkpoints.")


@blp.route("")
class Lessons(MethodView):
    @blp.response(200, LessonListSchema)
    def get(self):
        """Every lesson in order, with objectives, prerequisites and checkpoint rules"""
        return {"lessons": [lesson.summary_json() for lesson in current_app.extensions["lessons"].values()]}


@blp.route("/<string:lesson_id>")
class LessonDetail(MethodView):
    @blp.response(200, LessonSchema)
    @blp.problems(404)
    def get(self, lesson_id):
        """One lesson: metadata, markdown, rendered HTML and parsed blocks"""
        lesson = current_app.extensions["lessons"].get(lesson_id)
        if lesson is None:
            raise Problem(404, f"no lesson {lesson_id!r}", slug="not-found")
        return lesson.as_json()
