"""LTI 1.3: course platforms launch the lesson, its workbench and figures as a standard tool
(docs/lti.md). An LTI platform is one of our platforms; its users are that platform's learners."""

from __future__ import annotations

from flask import Flask, request, session
from flask.sessions import SecureCookieSessionInterface


class FramedSessions(SecureCookieSessionInterface):
    """A launched learner's session lives in the platform's iframe, where browsers send only
    `SameSite=None; Secure` cookies (partitioned per top-level site, CHIPS). Over plain http
    (development) the ordinary Lax cookie stays: browsers refuse `None` without `Secure`, and a
    platform on localhost is the same site anyway."""

    def _framed(self) -> bool:
        return bool(session.get("lti")) and request.is_secure

    def get_cookie_samesite(self, app: Flask) -> str | None:
        return "None" if self._framed() else super().get_cookie_samesite(app)

    def get_cookie_secure(self, app: Flask) -> bool:
        return self._framed() or super().get_cookie_secure(app)

    def get_cookie_partitioned(self, app: Flask) -> bool:
        return self._framed() or super().get_cookie_partitioned(app)


def init_app(app: Flask) -> None:
    from .views import blp

    app.session_interface = FramedSessions()
    app.register_blueprint(blp)
