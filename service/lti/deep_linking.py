"""Deep linking: an instructor adding the tool to a course picks what to place (the lesson, the
workbench, a figure) and the tool answers the platform with a signed LtiDeepLinkingResponse.

The selection page holds one form per choice, each posting its own signed response straight to
the platform's return URL: one click, no script (the pages' policy allows none inline)."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from flask import current_app
from pylti1p3.deep_link_resource import DeepLinkResource
from pylti1p3.exception import LtiException
from pylti1p3.lineitem import LineItem

from .course import TEACHING
from .tool import StrictLaunch


@dataclass(frozen=True)
class Choice:
    path: str
    title: str
    text: str
    graded: bool = False  # a line item for grades (the lesson's checkpoints)


def choices() -> list[Choice]:
    lessons = current_app.extensions["lessons"]
    found = [
        Choice(
            f"/lessons/{lesson.id}",
            lesson.title,
            f"The lesson, with its {len(lesson.checkpoints)} checkpoints (graded: checkpoints done of all).",
            graded=True,
        )
        for lesson in lessons.values()
    ]
    return found + [
        Choice(
            "/explorables/multi-head-attention",
            "Two-head causal attention workbench",
            "The live workbench alone: edit three tokens, toggle the mask, break a head.",
        ),
        Choice("/figures/four-heads", "Four heads over six positions", "The four-heads figure."),
        Choice(
            "/explorables/trained-heads",
            "Trained heads: previous-token and induction heads at work",
            "What the heads of a small trained model attend to.",
        ),
        Choice(
            "/explorables/kv-cache",
            "A KV cache, step by step",
            "Decoding with a KV cache alone: MHA, GQA, MQA, latent attention, a released model's cache in bytes.",
        ),
        Choice(
            "/explorables/online-softmax",
            "The online softmax, tile by tile",
            "Attention computed one block of keys at a time, as FlashAttention does, on numbers you edit.",
        ),
        Choice(
            "/explorables/rope-scaling",
            "RoPE past the training length",
            "Each RoPE pair's angles past the training length, and what each released scaling changes.",
        ),
        Choice(
            "/explorables/inside-the-model",
            "Inside the trained model",
            "The byte model's logit lens at every layer, and activation and attribution patching, exact.",
        ),
        Choice(
            "/explorables/speculative-decoding",
            "Speculative decoding",
            "The acceptance rule on your own p and q, and the byte model's rounds over its KV cache, exact.",
        ),
    ]


def resource(choice: Choice) -> DeepLinkResource:
    base = current_app.extensions["settings"].public_base  # never the request's Host header
    item = DeepLinkResource().set_url(base + choice.path).set_title(choice.title)
    item.set_target("iframe")
    if choice.graded:
        lesson = current_app.extensions["lessons"][choice.path.removeprefix("/lessons/")]
        item.set_lineitem(
            LineItem().set_score_maximum(len(lesson.checkpoints)).set_label(choice.title).set_resource_id(lesson.id)
        )
    return item


def return_url_of(launch: StrictLaunch) -> str:
    """Where the choices go: an http(s) URL on a host of the registered platform, asked for by
    someone who may add content to a course (LtiException otherwise: the launch is refused)."""
    claims = launch.get_launch_data()
    roles = claims.get("https://purl.imsglobal.org/spec/lti/claim/roles") or []
    if not set(roles) & TEACHING:
        raise LtiException("adding content to a course is for its instructors; this launch's roles are a learner's")
    settings = claims.get("https://purl.imsglobal.org/spec/lti-dl/claim/deep_linking_settings") or {}
    url = settings.get("deep_link_return_url")
    if not isinstance(url, str) or not SAFE_URL.fullmatch(url):
        raise LtiException("the deep-linking return URL must be an http(s) URL")
    parts = urlsplit(url)
    hosts: frozenset[str] = getattr(launch._registration, "return_hosts", frozenset())
    if parts.netloc.lower() not in hosts:
        raise LtiException(
            f"the deep-linking return URL is on {parts.netloc}, not on the registered platform "
            f"({', '.join(sorted(hosts))}); an administrator can add it with `workbench lti register --return-host`"
        )
    return url


# An absolute URL with nothing that could leave an HTML attribute or a CSP header: no quotes,
# spaces, semicolons, commas or control characters, no user name in the host.
SAFE_URL = re.compile(r"https?://[A-Za-z0-9.\-]+(?::[0-9]{1,5})?(?:[/?#][A-Za-z0-9._~!$&()*+=:@/?#%\[\]-]*)?")


def selection_page(launch: StrictLaunch):
    """The page an instructor picks from; each button returns its own signed choice."""
    return_url = return_url_of(launch)
    deep_link = launch.get_deep_link()
    forms = "".join(
        f'<li><form method="post" action="{html.escape(return_url)}">'
        f'<input type="hidden" name="JWT" value="{deep_link.get_response_jwt([resource(c)])}">'
        f"<h2>{html.escape(c.title)}</h2><p>{html.escape(c.text)}</p>"
        f'<button type="submit">Add “{html.escape(c.title)}”</button></form></li>'
        for c in choices()
    )
    page = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Add to the course</title>'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="stylesheet" href="/static/css/app.css"></head><body><main class="page lti-choices">'
        f"<h1>Add to the course</h1><ul>{forms}</ul></main></body></html>"
    )
    response = current_app.response_class(page, mimetype="text/html")
    origin = "{0.scheme}://{0.netloc}".format(urlsplit(return_url))
    ancestors = " ".join(["'self'", *current_app.extensions["settings"].frame_ancestors])
    response.headers["Content-Security-Policy"] = (
        "default-src 'self'; script-src 'none'; style-src 'self'; img-src 'self' data:; object-src 'none'; "
        f"base-uri 'self'; form-action {origin}; frame-ancestors {ancestors}"
    )
    return response
