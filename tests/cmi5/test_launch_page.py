"""The lesson's page opened by an LMS: with the five parameters well formed, the page may connect to
the LMS's two origins (its fetch URL's and its record store's) and nowhere else; with one missing or
malformed, a page that names each and carries no script, so nothing is fetched and nothing sent."""

from __future__ import annotations

import json
import re
import uuid
from urllib.parse import urlencode

import pytest

LESSON = "/lessons/multi-head-attention"
ACTOR = {"objectType": "Agent", "account": {"homePage": "https://lms.example", "name": "ada"}}


def parameters(**changes) -> dict:
    found = {
        "endpoint": "https://lrs.lms.example/xapi/",
        "fetch": "https://lms.example/cmi5/fetch/abc123",
        "actor": json.dumps(ACTOR),
        "registration": str(uuid.uuid4()),
        "activityId": "https://attention-workbench.example/xapi/lessons/multi-head-attention",
    }
    found.update(changes)
    return {k: v for k, v in found.items() if v is not None}


def connect_src(response) -> list[str]:
    policy = response.headers["Content-Security-Policy"]
    return re.search(r"connect-src ([^;]*)", policy).group(1).split()


def test_a_launch_may_connect_to_the_lms_origins_and_nothing_more(client):
    launched = client.get(f"{LESSON}?{urlencode(parameters())}")
    assert launched.status_code == 200
    assert connect_src(launched) == ["'self'", "https://lms.example", "https://lrs.lms.example"]
    page = launched.get_data(as_text=True)
    assert 'id="unit"' in page and 'class="site"' not in page  # the course's exit, not the site's links
    plain = client.get(LESSON)
    assert connect_src(plain) == ["'self'"] and 'id="unit"' not in plain.get_data(as_text=True)


@pytest.mark.parametrize(
    "changes, said",
    [
        ({"fetch": None}, ["fetch is missing"]),
        ({"endpoint": "javascript:alert(1)"}, ["endpoint must be an absolute http(s) URL without credentials"]),
        (
            {"endpoint": "https://user:pw@lrs.example/"},
            ["endpoint must be an absolute http(s) URL without credentials"],
        ),
        (
            {"actor": json.dumps({"mbox": "mailto:ada@example.org"})},
            ["actor must be an xAPI Agent in JSON with an account (homePage and name)"],
        ),
        ({"actor": "{not json"}, ["actor must be an xAPI Agent in JSON with an account (homePage and name)"]),
        ({"registration": "12", "activityId": None}, ["registration must be a UUID", "activityId is missing"]),
    ],
)
def test_a_malformed_launch_names_each_parameter_and_runs_nothing(client, changes, said):
    response = client.get(f"{LESSON}?{urlencode(parameters(**changes))}")
    assert response.status_code == 400 and response.mimetype == "text/html"
    page = response.get_data(as_text=True)
    shown = [re.sub(r"<[^>]+>", "", item).strip() for item in re.findall(r"<li>(.*?)</li>", page)]
    assert shown == said
    assert "<script" not in page  # nothing on this page fetches a token or sends a statement


def test_a_parameter_given_twice_is_refused(client):
    query = urlencode(parameters()) + "&registration=" + str(uuid.uuid4())
    response = client.get(f"{LESSON}?{query}")
    assert response.status_code == 400 and "registration</code> is given more than once" in response.get_data(
        as_text=True
    )


def test_the_refusal_speaks_the_learners_language(client):
    response = client.get(f"{LESSON}?{urlencode(parameters(fetch=None))}&lang=es")
    page = response.get_data(as_text=True)
    assert response.status_code == 400 and "Esta lección no pudo empezar" in page and "falta" in page
