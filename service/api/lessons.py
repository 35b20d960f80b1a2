"""`GET /lessons`, `GET /lessons/{id}`: metadata, checkpoints with rules, markdown, HTML, blocks."""

from __future__ import annotations

from flask import current_app, request
from flask.views import MethodView

from ..edge.problems import Problem
from ..i18n import choose
from ..text import N_
from .schemas.lessons import LessonListSchema, LessonSchema
from .smorest import Blueprint

blp = Blueprint("lessons", __name__, url_prefix="/api/v1/lessons", description="Lessons and their checkpoints.")


@blp.route("")
class Lessons(MethodView):
    @blp.response(200, LessonListSchema)
    def get(self):
        """Every lesson in order, with objectives, prerequisites and checkpoint rules

        In the learner's language where it is translated (`?lang=`, the language cookie, Accept-Language).
        """
        locale = choose(request)
        lessons = [lesson.in_locale(locale) for lesson in current_app.extensions["lessons"].values()]
        return {"lessons": [lesson.summary_json() for lesson in lessons]}, 200, {"Vary": "Accept-Language, Cookie"}


@blp.route("/<string:lesson_id>")
class LessonDetail(MethodView):
    @blp.response(200, LessonSchema)
    @blp.problems(404)
    def get(self, lesson_id):
        """One lesson: metadata, markdown, rendered HTML and parsed blocks

        In the learner's language where it is translated (`?lang=`, the language cookie,
        Accept-Language; `locale` and Content-Language say which), else in English.
        """
        lesson = current_app.extensions["lessons"].get(lesson_id)
        if lesson is None:
            raise Problem(404, N_("no lesson %(lesson)s"), args={"lesson": repr(lesson_id)}, slug="not-found")
        shown = lesson.in_locale(choose(request))
        return shown.as_json(), 200, {"Content-Language": shown.locale, "Vary": "Accept-Language, Cookie"}
