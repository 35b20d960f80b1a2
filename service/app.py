"""`create_app(config=None)`: settings, extensions, blueprints, front end. No work at import time."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any

from flask import Flask

from . import db, observability
from .config import Settings
from .db.quotas import Seen
from .db.quotas import configured as configured_quotas


class WorkbenchFlask(Flask):
    """Flask, minus a cost paid on every request: `ensure_sync` asks `inspect` whether each hook
    and view is a coroutine function, about twenty times a request. The answer is kept per
    function (a bound method's function: views are bound anew each request); this app has no
    coroutine functions, and one added later still gets Flask's wrapper. Flask documents
    overriding `ensure_sync`."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._plain: dict[Any, bool] = {}

    def ensure_sync(self, func: Callable[..., Any]) -> Callable[..., Any]:
        key = getattr(func, "__func__", func)
        try:
            plain = self._plain[key]
        except (KeyError, TypeError):  # TypeError: unhashable, so asked each time
            plain = super().ensure_sync(func) is func
            with contextlib.suppress(TypeError):
                self._plain[key] = plain
        return func if plain else super().ensure_sync(func)


def session_cookie(settings: Settings) -> dict[str, Any]:
    """Flask's session cookie settings for this site."""
    secure_site = settings.public_base.startswith("https://")
    return dict(
        # Served over https, the cookie is `__Host-` prefixed: browsers then accept it only from this
        # host itself, over https, for the whole site, so a sibling subdomain or a plain-http
        # answer cannot plant another browser's session in this one (docs/security.md).
        SESSION_COOKIE_NAME=("__Host-" if secure_site else "") + "workbench_session",
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",
        SESSION_COOKIE_SECURE=settings.env == "production" or secure_site,
        SESSION_COOKIE_DOMAIN=None,
        SESSION_COOKIE_PATH="/",
        PERMANENT_SESSION_LIFETIME=365 * 24 * 3600,
        # The cookie is sent when a view changes the session; POST /api/v1/session, which every page
        # calls on load, renews it (fast answers at the edge never write a cookie).
        SESSION_REFRESH_EACH_REQUEST=False,
    )


def _worker_starts(app: Flask, settings: Settings) -> None:
    """What each gunicorn worker starts once it has the app (service/server/hooks.py): the background
    process for large traces, and with chDB (one process holds its directory) the analytics sync."""
    from .api.attention import offload
    from .server.hooks import on_worker_start

    on_worker_start(app, offload.warm_up)
    if settings.analytics_url.startswith("chdb:"):
        from .db.stores import sync_in_background

        on_worker_start(app, sync_in_background)


def create_app(config: Mapping[str, Any] | None = None) -> Flask:
    settings = Settings.load(config)
    app = WorkbenchFlask(__name__, static_folder=None)
    # "//api/v1/x" is a 404, not a redirect built from the Host header (an open redirect's cousin).
    app.url_map.merge_slashes = False
    app.config.update(
        SECRET_KEY=settings.secret_key,
        **session_cookie(settings),
        MAX_CONTENT_LENGTH=settings.max_content_length,
        DEBUG=settings.debug,
        TESTING=settings.env == "testing",
        **settings.extra,
    )
    app.extensions["settings"] = settings
    app.extensions["quotas"] = configured_quotas(settings)
    app.extensions["quota_seen"] = Seen()  # what this process last read of each quota's subjects
    if settings.log_json:
        observability.configure_logging()

    from . import edge, i18n, lessons, lti
    from .api import init_app as init_api
    from .frontend import blp as frontend

    lessons.init_app(app)  # a malformed lesson stops start-up here, naming the file and line
    i18n.init_app(app)
    db.init_app(app)
    observability.init_app(app)
    init_api(app)
    app.register_blueprint(frontend)
    lti.init_app(app)
    edge.init_app(app)  # every request passes it, before Flask
    _worker_starts(app, settings)
    if settings.proxy_hops:
        from werkzeug.middleware.proxy_fix import ProxyFix

        hops = settings.proxy_hops
        proxied = ProxyFix(app.wsgi_app, x_for=hops, x_proto=hops, x_host=hops, x_prefix=hops)
        app.wsgi_app = proxied  # type: ignore[method-assign]  # Flask's documented way to wrap the WSGI app
    return app
