"""The built-in front end: HTML shells rendered in the learner's language (Jinja and the gettext
catalogs, frontend/pages/), static ES modules and their compiled catalogs, no build step."""

from __future__ import annotations

import functools
import gzip
import json
import os

from flask import Blueprint, abort, current_app, render_template, request, send_from_directory
from markupsafe import Markup
from werkzeug.security import safe_join

from .config import ROOT
from .edge.problems import http_problem
from .i18n import page_context
from .i18n_catalogs import module_graph
from .presets import presets
from .xapi import cmi5

FRONTEND = ROOT / "frontend"
blp = Blueprint("frontend", __name__, template_folder=str(FRONTEND / "pages"))

PAGES = {
    "/": "index.html",
    "/lessons/<lesson_id>": "lesson.html",
    "/explorables/multi-head-attention": "workbench.html",
    "/figures/four-heads": "four-heads.html",
    "/explorables/trained-heads": "trained-heads.html",
    "/explorables/kv-cache": "kv-cache.html",
    "/explorables/online-softmax": "online-softmax.html",
    "/explorables/rope-scaling": "rope-scaling.html",
    "/explorables/inside-the-model": "inside-the-model.html",
    "/explorables/speculative-decoding": "speculative-decoding.html",
    "/dashboard": "dashboard.html",
}


def _workbench_data() -> dict[str, object]:
    """The workbench reads its tokens' shape and defaults from the preset, not from literals."""
    tokens = presets()["workbench"]["request"]["tokens"]
    return {"preset_tokens": json.dumps(tokens), "preset_shape": (len(tokens), len(tokens[0]))}


PAGE_DATA = {"workbench.html": _workbench_data, "lesson.html": _workbench_data}  # the lesson embeds the workbench


@functools.cache
def module_preloads(script: str) -> tuple[str, ...]:
    """The modules a page's script imports statically, under /static/js/: the page names them all
    at once (`<link rel="modulepreload">`) so the browser fetches them together, instead of finding
    each level of imports one round trip after the last (on a phone's network, most of the time to
    the first drawing)."""
    page = (FRONTEND / "js" / "pages" / f"{script}.js").resolve()
    graph = module_graph(page, dynamic=False) - {page}
    return tuple(sorted(str(path.relative_to(FRONTEND / "js")) for path in graph))


@blp.app_context_processor
def _preloads() -> dict[str, object]:
    return {"module_preloads": module_preloads}  # every template extending _base.html, the 404 page too


def _html(filename: str, status: int, vary: str, **data: object):
    """A page in the request's language, never cached without asking again."""
    context = {**page_context(), **data}
    page = render_template(filename, Markup=Markup, **context)
    return page, status, {"Cache-Control": "no-cache", "Vary": vary, "Content-Language": context["lang"]}


def _page(filename: str):
    def view(**kwargs):
        lesson_id = kwargs.get("lesson_id")
        if lesson_id is not None and lesson_id not in current_app.extensions["lessons"]:
            abort(404)
        launch = cmi5.launch_problems(request.args) if lesson_id else None
        if launch:  # a cmi5 launch the page cannot start: which parameter, and nothing sent
            return _html("launch-refused.html", 400, "Accept-Language, Cookie", problems=launch)
        data = PAGE_DATA.get(filename, dict)()
        page, status, headers = _html(filename, 200, "Accept-Language, Cookie", launch=launch is not None, **data)
        if launch is not None:  # launched by an LMS: the page may reach its token and its store
            headers["Content-Security-Policy"] = cmi5.launch_policy(request.args)
        return page, status, headers

    view.__name__ = f"page_{filename.split('.')[0].replace('-', '_')}"
    return view


for rule, page in PAGES.items():
    blp.add_url_rule(rule, view_func=_page(page))


@blp.app_errorhandler(404)
def not_found(error):
    """An unknown page: a page with a way home for a browser (it asks for HTML first), the problem
    document for everyone else and for every path under /api/."""
    wanted = request.accept_mimetypes
    html = wanted.best_match(["text/html", "application/json", "application/problem+json"]) == "text/html"
    if not html or request.path.startswith("/api/") or wanted["text/html"] <= wanted["application/json"]:
        return http_problem(error).response()
    return _html("not-found.html", 404, "Accept, Accept-Language, Cookie")


@blp.get("/static/<path:path>")
def static(path: str):
    """A module, stylesheet or catalog: gzipped for a browser that accepts it (compressed once per file
    and version, about a quarter of its bytes), else as it is on disk."""
    if not (path.startswith(("js/", "css/", "i18n/")) and path.endswith((".js", ".css", ".json"))):
        abort(404)
    found = safe_join(str(FRONTEND), path)
    if request.accept_encodings["gzip"] <= 0 or found is None or not os.path.isfile(found):
        answer = send_from_directory(FRONTEND, path, max_age=300)
    else:
        stat = os.stat(found)
        answer = current_app.response_class(
            gzipped(found, stat.st_mtime_ns, stat.st_size), mimetype=MIMETYPES[path.rsplit(".", 1)[1]]
        )
        answer.headers["Content-Encoding"] = "gzip"
        answer.cache_control.max_age, answer.cache_control.public = 300, True
        answer.set_etag(f"{stat.st_mtime_ns:x}-{stat.st_size:x}-gz")
        answer.make_conditional(request)
    answer.vary.add("Accept-Encoding")
    return answer


MIMETYPES = {"js": "text/javascript", "css": "text/css", "json": "application/json"}


@functools.lru_cache(maxsize=256)
def gzipped(path: str, mtime_ns: int, size: int) -> bytes:
    """A file's bytes gzipped (the same bytes every time: no timestamp), once per version of it."""
    with open(path, "rb") as file:
        return gzip.compress(file.read(), 9, mtime=0)


FAVICON = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" '
    'fill="#1f5fbf"/><path d="M3 12V4h2l3 4 3-4h2v8h-2V7l-3 4-3-4v5z" fill="#fff"/></svg>'
)


@blp.get("/favicon.ico")
def favicon():
    return current_app.response_class(FAVICON, mimetype="image/svg+xml", headers={"Cache-Control": "max-age=86400"})
