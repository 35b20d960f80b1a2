"""The tool's LTI 1.3 endpoints: OIDC login initiation, the launch, the key set, the
configuration a platform administrator pastes. A launch that fails any check shows a page
saying why and records nothing."""

from __future__ import annotations

import html
import logging
import secrets
import time
from urllib.parse import parse_qs, urlsplit

import requests
from flask import Blueprint, current_app, redirect, request, url_for
from flask import session as cookie
from pylti1p3.contrib.flask import FlaskCookieService, FlaskOIDCLogin
from pylti1p3.exception import LtiException

from ..db import lti_courses
from ..db import sessions as sessions_db
from ..db.erasure import erase_everywhere
from ..db.stores import store_of
from ..db.tables import Platform
from ..edge.caller import browser_learner
from ..edge.problems import Problem
from ..i18n import keep, supported
from ..observability import security_header_values
from . import dynamic, grades, keys, notices
from .course import course_of
from .course import learners as course_learners
from .deep_linking import selection_page
from .registrations import RegistrationError
from .registrations import register as store_registration
from .tool import CLAIM, SCOPES, PatientSession, StrictLaunch, ToolRegistration, pseudonym, services

blp = Blueprint("lti", __name__, url_prefix="/lti")

PAGES = ("/explorables/multi-head-attention", "/figures/four-heads", "/explorables/trained-heads")
DEFAULT_PAGE = "/lessons/multi-head-attention"  # where a launch that names no page of ours lands
# A Tool URL set to the launch endpoint itself, or to the tool's root, is a common platform setup:
# such a launch names the tool, not a page, and lands on the default lesson.
NAMES_THE_TOOL = ("/", "/lti/launch", "/lti/login")
log = logging.getLogger("service.lti")


class LaunchRefused(Exception):
    """A launch or login this tool will not accept; the message is shown to the person."""


@blp.route("/login", methods=["GET", "POST"])
def login():
    """OIDC third-party initiated login: send the browser to the platform's authorization endpoint."""
    lti_request, tool_conf, nonces = services(current_app.extensions["db"])
    cookies = FlaskCookieService(lti_request)
    try:
        issuer = lti_request.get_param("iss")
        if not issuer:
            raise LaunchRefused("the login request names no issuer (iss)")
        tool_conf.find_registration_by_params(issuer, lti_request.get_param("client_id"))  # or why not
        target = lti_request.get_param("target_link_uri")
        if not target:
            raise LaunchRefused("the login request names no target_link_uri")
        target_path(target)
        if not lti_request.get_param("login_hint"):
            raise LaunchRefused("the login request names no user (login_hint)")
        login = FlaskOIDCLogin(lti_request, tool_conf, session_service=nonces, cookie_service=cookies)
        response = login.redirect(_public() + url_for("lti.launch"))
        sent = parse_qs(urlsplit(response.headers["Location"]).query)
        nonces.bind(sent["state"][0], sent["nonce"][0])  # the launch must bring this nonce, with this state
        return response
    except (LtiException, LaunchRefused) as e:
        return refused(e)


@blp.post("/launch")
def launch():
    """A resource link launch: validate the id_token, start the learner's session, show the page."""
    lti_request, tool_conf, nonces = services(current_app.extensions["db"])
    try:
        message = StrictLaunch(
            lti_request,
            tool_conf,
            session_service=nonces,
            cookie_service=FlaskCookieService(lti_request),
            requests_session=PatientSession(),
        )
        claims = dict(message.get_launch_data())
        if message.is_deep_link_launch():
            return selection_page(message)
        path = target_path(str(claims.get(CLAIM + "target_link_uri", "")))
        if path == "/dashboard" and course_of(claims) is None:
            raise LaunchRefused("the dashboard is for a course's instructors, launched with names and roles")
        if not claims.get("sub"):
            raise LaunchRefused("the launch names no user (sub): anonymous launches cannot keep progress")
        registration = message._registration
        assert isinstance(registration, ToolRegistration)
        start_session(registration, claims, path)
    except (LtiException, LaunchRefused) as e:
        return refused(e)
    response = redirect(path, code=303)
    presentation = claims.get(CLAIM + "launch_presentation")
    locale = supported(str(presentation.get("locale") or "")) if isinstance(presentation, dict) else None
    if locale:  # the platform says the learner's language: the choice this tool keeps
        keep(response, locale)
    return response


def target_path(target: str) -> str:
    """The page a target_link_uri points at, if this tool has it."""
    parts = urlsplit(target)
    here = urlsplit(_public()).netloc
    if parts.netloc and parts.netloc != here:
        raise LaunchRefused(f"the launch targets another site ({parts.netloc}), not this tool ({here})")
    path = parts.path.rstrip("/") or "/"
    if path in NAMES_THE_TOOL:
        log.info("a launch targets %s, not a page: landing on %s", path, DEFAULT_PAGE)
        return DEFAULT_PAGE
    if path in PAGES or path == "/dashboard":
        return path
    lesson = path.removeprefix("/lessons/")
    if path.startswith("/lessons/") and lesson in current_app.extensions["lessons"]:
        return path
    raise LaunchRefused(f"this tool has no page at {path}: launch a lesson, the workbench or a figure")


def start_session(registration: ToolRegistration, claims: dict, path: str) -> None:
    """The launched user becomes a learner of the registration's platform in this browser; a
    lesson's launch that offers a line item is where their score will go."""
    learner = pseudonym(claims["iss"], claims["sub"])
    with current_app.extensions["db"].write() as session:
        platform = session.get(Platform, registration.platform_id)
        assert platform is not None
        name = platform.name
        if path.startswith("/lessons/"):
            lesson = path.removeprefix("/lessons/")
            grades.link(session, registration.row_id, registration.platform_id, learner, lesson, claims)
            course = (claims.get(CLAIM + "context") or {}).get("id")
            if isinstance(course, str) and course:  # its statements name the course as their parent
                lti_courses.keep(session, registration.platform_id, learner, lesson, registration.row_id, course)
        mark = sessions_db.learner_mark(registration.platform_id, learner)
        sessions_db.restore(session, mark)  # launched again after an erasure: this session is theirs
    current_app.extensions["session_cache"].put(mark, False)
    cookie.clear()
    cookie.update(
        learner=learner,
        platform=name,
        platform_id=registration.platform_id,
        sid=secrets.token_hex(16),
        sid_at=int(time.time()),
        lti={
            "registration": registration.row_id,
            "deployment": claims.get(CLAIM + "deployment_id"),
            "resource_link": claims.get(CLAIM + "resource_link", {}).get("id"),
            "lineitem": claims.get("https://purl.imsglobal.org/spec/lti-ags/claim/endpoint", {}).get("lineitem"),
            "issuer": claims["iss"],
            "course": course_of(claims),  # set for instructors: their course's learners (service/lti/course.py)
        },
    )
    cookie.permanent = True


def _public() -> str:
    """The tool's own address (WORKBENCH_PUBLIC_URL), never the request's Host header."""
    return current_app.extensions["settings"].public_base


def refused(error: Exception):
    """The page a refused login or launch shows (nothing was recorded)."""
    return page(
        "This launch could not be accepted",
        str(error) or error.__class__.__name__,
        400,
        "Nothing was recorded. Ask the course's administrator to check the tool's registration "
        "(docs/lti.md), or open the lesson again from the course.",
    )


def page(title: str, reason: str, status: int, after: str, close: bool = False, opener: str | None = None):
    """A page for the person at the platform: what happened, why, what next; `close` tells the
    platform's window that a registration is done (org.imsglobal.lti.close). The platform at
    `opener` may frame it, and a window it opened keeps it as its opener (the close message's way)."""
    script = '<script src="/static/js/lti-close.js"></script>' if close else ""
    body = (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<link rel="stylesheet" href="/static/css/app.css">{script}</head><body><main class="page">'
        f'<h1>{html.escape(title)}</h1><p class="lti-reason">{html.escape(reason)}</p>'
        f"<p>{html.escape(after)}</p></main></body></html>"
    )
    response = current_app.response_class(body, status=status, mimetype="text/html")
    if opener:
        csp = dict(security_header_values(current_app.extensions["settings"]))["Content-Security-Policy"]
        response.headers["Content-Security-Policy"] = f"{csp} {opener}"  # frame-ancestors is its last directive
        response.headers["Cross-Origin-Opener-Policy"] = "unsafe-none"
    return response


@blp.get("/register")
def register_dynamically():
    """LTI Dynamic Registration: the platform opened an invitation (service/lti/dynamic.py)."""
    db, settings, args = current_app.extensions["db"], current_app.extensions["settings"], request.args
    token, opener = args.get("invitation", ""), _origin(args.get("openid_configuration", ""))
    try:
        with db.read() as session:
            platform = dynamic.invited(session, token)
        if platform is None:
            raise dynamic.RegistrationRefused(
                "this invitation was used already, has expired, or was never issued: ask for a new one "
                "(workbench lti invite)"
            )
        registrar = dynamic.Registrar(
            _public(),
            _public() + DEFAULT_PAGE,
            args.get("openid_configuration", ""),
            args.get("registration_token"),
            settings.env != "production",
        )
        new = dynamic.registered(registrar, platform)
        with db.write() as session:
            if not dynamic.spend(session, token):
                raise dynamic.RegistrationRefused("this invitation was used by another registration meanwhile")
            row = store_registration(session, new)
            log.info("platform %s registered dynamically: %s client %s", platform, row.issuer, row.client_id)
    except (dynamic.RegistrationRefused, RegistrationError) as e:
        with db.write() as session:
            dynamic.failed(session, token)  # a few tries, then the invitation is spent
        return page(
            "This registration could not be completed",
            str(e),
            400,
            f"Nothing was stored. An invitation allows {dynamic.FAILURES} failed attempts: ask for a new one if "
            "this one is spent, or check the platform's settings (docs/lti.md).",
            opener=opener,
        )
    return page(
        "The tool is registered",
        f"Registered with {new.issuer} for {platform}: launches from it now open the lessons.",
        200,
        "You can close this window.",
        close=True,
        opener=opener,
    )


def _origin(url: str) -> str | None:
    """The platform's origin, from its configuration's URL: it may frame or open the registration."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme in ("http", "https") and parts.netloc else None


MAX_NOTICES = 100  # a batch of the Platform Notification Service, at most


@blp.post("/notices")
def receive_notices():
    """LTI Platform Notification Service: a registered platform's signed notices (service/lti/notices.py)."""
    body = request.get_json(silent=True)
    sent = body.get("notices") if isinstance(body, dict) else None
    if not isinstance(sent, list) or not sent or len(sent) > MAX_NOTICES:
        raise Problem(
            400,
            f'a batch of notices is {{"notices": [{{"jwt": ...}}, ...]}}, 1 to {MAX_NOTICES} of them',
            slug="invalid-notices",
        )
    tokens = [n.get("jwt") if isinstance(n, dict) else None for n in sent]
    try:
        return {"notices": notices.receive(current_app.extensions["db"], tokens, _erase)}
    except notices.NoticeRefused as e:
        raise Problem(401, f"the notices were refused, none acted on: {e}", slug="notice-refused") from None


def _erase(platform_id: int, learner: str) -> None:
    """A learner deleted on the platform, erased here as `DELETE /learners/{id}` does."""
    app = current_app
    erase_everywhere(
        app.extensions["db"],
        store_of(app),
        app.extensions["session_cache"],
        app.permanent_session_lifetime,
        platform_id,
        learner,
    )


@blp.get("/course")
def course():
    """The launched instructor's course: its learners (pseudonyms) and what each completed."""
    launched = cookie.get("lti") or {}
    if not browser_learner() or not launched.get("course"):
        raise Problem(403, "only an instructor launched from their course sees its learners", slug="forbidden")
    try:
        return course_learners(
            current_app.extensions["db"],
            launched["registration"],
            launched["issuer"],
            int(cookie["platform_id"]),
            launched["course"],
            current_app.extensions["settings"].k_anonymity,
        )
    except (LtiException, requests.RequestException) as e:
        raise Problem(502, f"the course platform did not give its members: {e}", slug="platform-unavailable") from e


@blp.get("/jwks")
def jwks():
    """The tool's public keys (signing key first)."""
    db = current_app.extensions["db"]
    keys.signing(db)  # made on first use
    with db.read() as session:
        return keys.key_set(session)


@blp.get("/config")
def config():
    """What a platform administrator needs to register the tool (docs/lti.md)."""
    base = _public()
    return {
        "title": "Multi-head attention workbench",
        "description": "A lesson on multi-head attention with a live two-head causal attention workbench.",
        "oidc_initiation_url": base + url_for("lti.login"),
        "target_link_uri": base + DEFAULT_PAGE,
        "redirect_uris": [base + url_for("lti.launch")],
        "public_jwk_url": base + url_for("lti.jwks"),
        "scopes": list(SCOPES),
        "claims": ["iss", "sub"],
        "messages": [{"type": "LtiResourceLinkRequest", "target_link_uri": base + p} for p in PAGES],
    }
