"""Deep linking: the instructor's choices come back to the platform as signed responses that a
platform-side library (lti1p3platform) accepts, verified with the tool's published keys."""

from __future__ import annotations

import html
import re

import jwt
import pytest
from lti1p3platform.ltiplatform import LTI1P3PlatformConfAbstract
from lti1p3platform.registration import Registration as PlatformSideRegistration

from .platform import CLAIM, Platform

pytestmark = pytest.mark.databases  # SQLite and PostgreSQL

DL = "https://purl.imsglobal.org/spec/lti-dl/claim/"
RETURN_URL = "https://lms.example.edu/deep-linking/return?course=7"


class LmsSide(LTI1P3PlatformConfAbstract):
    """The platform's own library, configured with the tool's key set."""

    def init_platform_config(self, **kwargs):
        self.tool_key_set = kwargs["tool_key_set"]

    def get_registration_by_params(self, **kwargs):
        return PlatformSideRegistration().set_tool_key_set(self.tool_key_set)


INSTRUCTOR = "http://purl.imsglobal.org/vocab/lis/v2/membership#Instructor"
LEARNER = "http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"


def deep_linking_request(lms: Platform, nonce: str, return_url: str = RETURN_URL, roles=(INSTRUCTOR,)) -> dict:
    claims = lms.claims(nonce, **{CLAIM + "message_type": "LtiDeepLinkingRequest", CLAIM + "roles": list(roles)})
    del claims[CLAIM + "resource_link"]
    claims[DL + "deep_linking_settings"] = {
        "deep_link_return_url": return_url,
        "accept_types": ["ltiResourceLink"],
        "accept_presentation_document_targets": ["iframe", "window"],
        "data": "opaque-7",
    }
    return claims


def offered(client, lms) -> tuple[object, dict[str, str]]:
    """The selection page, and each choice's signed response by the title on its button."""
    params = lms.login(client)
    page = lms.launch(client, params["state"], lms.id_token(deep_linking_request(lms, params["nonce"])))
    assert page.status_code == 200 and page.mimetype == "text/html"
    text = page.get_data(as_text=True)
    forms = re.findall(r'<form method="post" action="([^"]+)"><input type="hidden" name="JWT" value="([^"]+)">', text)
    titles = [html.unescape(t) for t in re.findall(r"<h2>([^<]+)</h2>", text)]
    assert {html.unescape(action) for action, _ in forms} == {RETURN_URL}
    return page, dict(zip(titles, (token for _, token in forms), strict=True))


def test_each_choice_returns_a_response_the_platforms_library_accepts(client, lms):
    _, responses = offered(client, lms)
    assert list(responses) == [
        "Multi-head attention",
        "In real models: the KV cache, grouped-query and latent attention",
        "Long contexts: sliding windows, a rolling cache and attention sinks",
        "How attention is computed at length: the online softmax",
        "Past the training length: RoPE scaling",
        "Inside the trained model: the logit lens and activation patching",
        "Speculative decoding: draft, verify, accept",
        "Two-head causal attention workbench",
        "Four heads over six positions",
        "Trained heads: previous-token and induction heads at work",
        "A KV cache, step by step",
        "The online softmax, tile by tile",
        "RoPE past the training length",
        "Inside the trained model",
        "Speculative decoding",
    ]
    platform_side = LmsSide(tool_key_set=client.get("/lti/jwks").get_json())
    platform_side.get_registration()
    urls = []
    for title, token in responses.items():
        (item,) = platform_side.validate_deeplinking_resp({"JWT": token})
        assert item["type"] == "ltiResourceLink" and item["title"] == title
        urls.append(item["url"])
    assert urls == [
        "http://localhost/lessons/multi-head-attention",
        "http://localhost/lessons/kv-cache-and-latent-attention",
        "http://localhost/lessons/long-context",
        "http://localhost/lessons/online-softmax",
        "http://localhost/lessons/rope-scaling",
        "http://localhost/lessons/inside-the-model",
        "http://localhost/lessons/speculative-decoding",
        "http://localhost/explorables/multi-head-attention",
        "http://localhost/figures/four-heads",
        "http://localhost/explorables/trained-heads",
        "http://localhost/explorables/kv-cache",
        "http://localhost/explorables/online-softmax",
        "http://localhost/explorables/rope-scaling",
        "http://localhost/explorables/inside-the-model",
        "http://localhost/explorables/speculative-decoding",
    ]


def test_the_response_is_addressed_to_the_platform_and_carries_its_data_back(client, lms, app):
    _, responses = offered(client, lms)
    keys = {k["kid"]: k for k in client.get("/lti/jwks").get_json()["keys"]}
    token = responses["Multi-head attention"]
    public = jwt.PyJWK(keys[jwt.get_unverified_header(token)["kid"]]).key
    claims = jwt.decode(token, public, algorithms=["RS256"], audience=lms.issuer)
    assert claims["iss"] == lms.client_id
    assert claims[CLAIM + "message_type"] == "LtiDeepLinkingResponse"
    assert claims[CLAIM + "deployment_id"] == lms.deployment
    assert claims[DL + "data"] == "opaque-7"
    (item,) = claims[DL + "content_items"]
    checkpoints = len(app.extensions["lessons"]["multi-head-attention"].checkpoints)
    assert item["lineItem"]["scoreMaximum"] == checkpoints and item["lineItem"]["resourceId"] == "multi-head-attention"


def test_the_selection_page_may_post_only_to_the_platform_and_runs_no_script(client, lms):
    page, _ = offered(client, lms)
    policy = page.headers["Content-Security-Policy"]
    assert "form-action https://lms.example.edu;" in policy and "script-src 'none'" in policy
    assert client.get("/api/v1/session").status_code == 404  # choosing starts no learner session


def ask(client, lms, **request):
    params = lms.login(client)
    return lms.launch(client, params["state"], lms.id_token(deep_linking_request(lms, params["nonce"], **request)))


@pytest.mark.parametrize(
    "return_url",
    [
        "https://attacker.example/collect",  # another site: the signed choices would go there
        "javascript:alert(document.domain)",  # not a place to post to
        "https://lms.example.edu; script-src *",  # would write itself into the page's policy
        'https://lms.example.edu/r?x="><script>',  # would leave the form's attribute
        "https://user@lms.example.edu/r",  # a user name in the host
        "ftp://lms.example.edu/r",
    ],
)
def test_a_return_url_off_the_registered_platform_is_refused(client, lms, return_url):
    page = ask(client, lms, return_url=return_url)
    assert page.status_code == 400 and "This launch could not be accepted" in page.get_data(as_text=True)
    assert 'name="JWT"' not in page.get_data(as_text=True)  # no signed choice was made


def test_a_learner_cannot_add_content_to_the_course(client, lms):
    page = ask(client, lms, roles=(LEARNER,))
    text = page.get_data(as_text=True)
    assert page.status_code == 400 and "for its instructors" in text and 'name="JWT"' not in text


def test_a_host_the_administrator_registered_takes_the_choices(app, client, lms):
    from service.lti.registrations import NewRegistration, register

    school = "https://school.example.org/courses/7/deep_linking"
    assert ask(client, lms, return_url=school).status_code == 400
    with app.extensions["db"].write() as session:
        register(session, NewRegistration(**lms.registration(return_hosts=("school.example.org",))))
    page = ask(client, lms, return_url=school)
    assert (
        page.status_code == 200 and "form-action https://school.example.org;" in page.headers["Content-Security-Policy"]
    )
