"""The learner's language: which locale a request is read in, and the words in it.

Picked the way users expect: an explicit choice (`?lang=` on any request, kept in the
`workbench_lang` cookie: the language menu sets it, and so does an LTI launch whose
`launch_presentation.locale` we offer), then the browser's `Accept-Language`, then English.
Flask-Babel asks `select` for the locale of each request, so the gettext catalogs
(`service/translations/`), `get_locale()` and the lessons the API returns agree.

The catalogs are gettext `.po` files; `make i18n` extracts the strings (pages, scripts, problem
details), updates the catalogs, writes the pseudo-locale and compiles each catalog twice: `.mo`
for the server, `frontend/i18n/<locale>/<page>.json` for each page's scripts (service/i18n_catalogs.py).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from babel import Locale
from babel.support import NullTranslations, Translations
from flask import Flask, current_app, has_app_context, has_request_context, request
from flask_babel import Babel
from werkzeug.wrappers import Request, Response

LOCALES = {"en": "English", "es": "Español", "zh-CN": "简体中文"}  # BCP 47 tag -> its own name
# The pseudo-locale (settings.pseudo_locale): every string accented and about 35 % longer, so a
# layout that only fits English shows. CLDR has no en-XA, so Babel files it under en_001.
PSEUDO = "en-XA"
RIGHT_TO_LEFT: frozenset[str] = frozenset()  # none yet; `dir` follows this when one is added
DEFAULT = "en"
COOKIE = "workbench_lang"
ONE_YEAR = 365 * 24 * 3600
TRANSLATIONS = Path(__file__).parent / "translations"


def pseudo_offered() -> bool:
    return has_app_context() and current_app.extensions["settings"].pseudo_locale


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
    if parts == ["en", "xa"] and pseudo_offered():
        return PSEUDO
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


def current() -> str:
    """The locale of the request being answered (English outside one)."""
    return choose(request) if has_request_context() else DEFAULT


def keep(response: Response, locale: str) -> None:
    """Remember an explicit choice for a year (the menu, `?lang=`, an LTI launch)."""
    response.set_cookie(COOKIE, locale, max_age=ONE_YEAR, samesite="Lax", httponly=False, secure=request.is_secure)


def direction(locale: str) -> str:
    return "rtl" if locale in RIGHT_TO_LEFT else "ltr"


def babel_name(locale: str) -> str:
    """Babel's identifier, which names the catalog's folder: zh-CN is zh_Hans_CN (Babel adds the
    script, and gettext would not find a zh_CN folder from it); the pseudo-locale is en_001."""
    return "en_001" if locale == PSEUDO else str(Locale.parse(locale.replace("-", "_")))


@cache
def translations(locale: str) -> NullTranslations:
    """The compiled catalog of a locale (English: the msgids themselves)."""
    if locale == DEFAULT:
        return NullTranslations()
    return Translations.load(str(TRANSLATIONS), [babel_name(locale)])


def translate(message: str, locale: str, values: dict[str, object] | None = None) -> str:
    """`message` (a msgid) in `locale`, with `%(name)s` placeholders filled from `values`."""
    text = translations(locale).gettext(message)
    return text % values if values else text


def speaker(locale: str | None = None):
    """say(msgid, **values) in `locale` (the request's by default): what compute's messages take."""
    chosen = locale or current()

    def say(msgid: str, /, **values: object) -> str:
        return translate(msgid, chosen, values or None)

    return say


def page_context() -> dict[str, object]:
    """What every page's template needs to speak the request's language."""
    locale = current()
    offered = dict(LOCALES, **({PSEUDO: "Ƥšéûðö"} if pseudo_offered() else {}))
    return {"lang": locale, "dir": direction(locale), "locales": offered}


def init_app(app: Flask) -> None:
    Babel(app, locale_selector=lambda: babel_name(choose(request)))

    @app.after_request
    def remember_lang(response: Response) -> Response:
        chosen = supported(request.args.get("lang"))
        if chosen and request.cookies.get(COOKIE) != chosen:
            keep(response, chosen)
        return response
