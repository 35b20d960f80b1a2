"""The built-in front end: HTML shells and static ES modules, no build step."""

from __future__ import annotations

from flask import Blueprint, abort, current_app, send_from_directory

from .config import ROOT

FRONTEND = ROOT / "frontend"
blp = Blueprint("frontend", __name__)

PAGES = {
    "/": "index.html",
    "/lessons/<lesson_id>": "lesson.html",
    "/explorables/multi-head-attention": "workbench.html",
    "/figures/four-heads": "four-heads.html",
    "/explorables/trained-heads": "trained-heads.html",
    "/dashboard": "dashboard.html",
}


def _page(filename: str):
    def view(**kwargs):
        lesson_id = kwargs.get("lesson_id")
        if lesson_id is not None and lesson_id not in current_app.extensions["lessons"]:
            abort(404)
        return send_from_directory(FRONTEND / "pages", filename, mimetype="text/html", max_age=0)

    view.__name__ = f"page_{filename.split('.')[0].replace('-', '_')}"
    return view


for rule, page in PAGES.items():
    blp.add_url_rule(rule, view_func=_page(page))


@blp.get("/static/<path:path>")
def static(path: str):
    if not (path.startswith(("js/", "css/")) and path.endswith((".js", ".css"))):
        abort(404)
    return send_from_directory(FRONTEND, path, max_age=300)


FAVICON = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" '
    'fill="#1f5fbf"/><path d="M3 12V4h2l3 4 3-4h2v8h-2V7l-3 4-3-4v5z" fill="#fff"/></svg>'
)


@blp.get("/favicon.ico")
def favicon():
    return current_app.response_class(FAVICON, mimetype="image/svg+xml", headers={"Cache-Control": "max-age=86400"})
