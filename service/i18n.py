"""The learner's language: which locale a request is read in, picked the way users expect.

In order: an explicit choice (`?lang=` on any request, kept in the `workbench_lang` cookie: the
language menu sets it, and so does an LTI launch whose `launch_presentation.locale` we offer),
then the browser's `Accept-Language`, then English. Flask-Babel asks `select` for the locale of
each request, so gettext catalogs and `get_locale()` agree with the lessons the API returns.
"""

from __future__ import annotations

from flask import Flask, Request, request
from flask_babel import Babel
from werkzeug.wrappers import Response

LOCALES = {"en": "English", "es": "Español", "zh-CN": "简体中文"}  # BCP 47 tag -> its own name
RIGHT_TO_LEFT: frozenset[str] = frozenset()  # none yet; `dir` follows this when one is added
DEFAULT = "en"
COOKIE = "workbench_lang"
ONE_YEAR = 365 * 24 * 3600


def supported(tag: str | None) -> str | None:
    """A BCP 47 tag (any case, `_` or `-`) as the locale we offer for it, or None: `es-MX` and
    `es_419` are `es`; `zh`, `zh-CN`, `zh-Hans` and `zh-SG` are `zh-CN` (Simplified); `zh-TW` and
    `zh-Hant` are not offered (Traditional), rather than shown in the wrong script."""
    if not tag or not isinstance(tag, str) or len(tag) > 35:
        return None
    parts = tag.replace("_", "-").lower().split("-")
    if parts[0] == "zh":
        rest = set(parts[1:])
        return None if rest & {"tw", "hk", "mo", "hant"} else "zh-CN"
    return parts[0] if parts[0] in LOCALES else None


def choose(req: Request) -> str:
    explicit = supported(req.args.get("lang")) or supported(req.cookies.get(COOKIE))
    if explicit:
        return explicit
    for tag, _quality in req.accept_languages:  # best first
        found = supported(tag)
        if found:
            return found
    return DEFAULT


def keep(response: Response, locale: str) -> None:
    """Remember an explicit choice for a year (the menu, `?lang=`, an LTI launch)."""
    response.set_cookie(COOKIE, locale, max_age=ONE_YEAR, samesite="Lax", httponly=False, secure=request.is_secure)


def direction(locale: str) -> str:
    return "rtl" if locale in RIGHT_TO_LEFT else "ltr"


def babel_name(locale: str) -> str:
    return locale.replace("-", "_")  # Babel's spelling: zh_CN


def init_app(app: Flask) -> None:
    Babel(app, locale_selector=lambda: babel_name(choose(request)))

    @app.after_request
    def remember_lang(response: Response) -> Response:
        chosen = supported(request.args.get("lang"))
        if chosen and request.cookies.get(COOKIE) != chosen:
            keep(response, chosen)
        return response
