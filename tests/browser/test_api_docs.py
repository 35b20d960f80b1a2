"""The API reference (/api/docs) is a page of ours: accessible, every operation on it; the console
(/api/docs/try, Swagger UI) renders offline under the service's Content-Security-Policy and runs
every documented example."""

import pytest

from .conftest import PATIENCE, open_page


def test_swagger_ui_renders_every_operation(page, live):
    messages = []
    page.on("console", lambda m: messages.append(m.text) if m.type == "error" else None)
    page.goto(live.url + "/api/docs/try")
    page.locator(".opblock").first.wait_for(timeout=15000 * PATIENCE)
    assert page.locator(".opblock").count() >= 20
    assert not [m for m in messages if "Content Security Policy" in m], messages


def _authorize(page, token: str) -> None:
    page.locator("button.authorize").first.click()
    page.get_by_label("auth-bearer-value").fill(token)
    bearer = page.locator(".auth-container").first
    bearer.locator("button.authorize").click()
    bearer.locator("button.btn-done").click()


def _try_it_out(page, path: str, *, example: str | None = None, params: dict | None = None, body: str | None = None):
    """Open an operation, Try it out with its documented example (or `body`), Execute: the status
    and the response body the page shows."""
    block = page.locator(f'.opblock-post:has(.opblock-summary-path[data-path="{path}"])')
    if not block.locator(".try-out__btn").is_visible():
        block.locator(".opblock-summary").click()
    if block.locator(".try-out__btn:not(.cancel)").count():
        block.locator(".try-out__btn").click()
    for name, value in (params or {}).items():
        block.locator(f'tr[data-param-name="{name}"] input').fill(value)
    if example is not None:
        block.locator("select.examples-select-element").select_option(example)
    if body is not None:
        block.locator("textarea.body-param__text").fill(body)
    block.locator(".btn.execute").click()
    status = block.locator(".live-responses-table tbody .response-col_status")
    status.wait_for(timeout=15000 * PATIENCE)
    answer = block.locator(".live-responses-table tbody .response-col_description pre").first.inner_text()
    code = int(status.inner_text().strip())
    block.locator(".btn-clear").click()
    return code, answer


def test_every_documented_request_example_succeeds_through_the_docs_page(page, live):
    """A platform engineer authorizes with their key and runs each operation's own example."""
    import json

    import requests

    from tests.browser.conftest import demo_cohort

    (token,) = demo_cohort(live, 1, 7, "docs-platform", "events:write,progress:read,analytics:read")
    spec = requests.get(live.url + "/api/v1/openapi.json", timeout=10).json()
    model_id = requests.get(live.url + "/api/v1/models", timeout=10).json()["models"][0]["id"]
    page.goto(live.url + "/api/docs/try")
    page.locator(".opblock").first.wait_for(timeout=15000 * PATIENCE)
    _authorize(page, token)

    tried = {}
    for path, ops in spec["paths"].items():
        content = ops.get("post", {}).get("requestBody", {}).get("content", {}).get("application/json")
        if content is None or path.endswith("/answers"):
            continue
        params = {"model_id": model_id} if "{model_id}" in path else None
        for example in content.get("examples") or [None]:
            code, answer = _try_it_out(page, path, example=example, params=params)
            tried[(path, example)] = code
            assert 200 <= code < 300, (path, example, code, answer[:500])
            if path.endswith("/challenges"):
                challenge = json.loads(answer)

    # A challenge's answers depend on its random cases: the example shows the form; here the
    # body is the answer of the tests' plain-loop reference to the challenge the page just issued.
    from tests.api.test_challenges import reference_answers

    answers = reference_answers(challenge["cases"])
    answers_path = "/api/v1/exercises/multi-head-attention/challenges/{challenge_id}/answers"
    code, answer = _try_it_out(
        page, answers_path, params={"challenge_id": challenge["id"]}, body=json.dumps({"answers": answers})
    )
    assert code == 200 and json.loads(answer)["correct"] is True, answer[:500]
    assert len(tried) >= 7, tried  # attention, compare, the model, one event, a batch, check, a challenge


@pytest.mark.parametrize("width, height", [(1280, 800), (390, 844)])
def test_the_reference_is_accessible_and_links_each_operation(page, live, width, height):
    from axe_playwright_python.sync_playwright import Axe

    page.set_viewport_size({"width": width, "height": height})
    open_page(page, live, "/api/docs")
    results = Axe().run(page)
    assert [v["id"] for v in results.response["violations"] if v["impact"] in ("serious", "critical")] == []
    page.get_by_role("link", name="POST /api/v1/events", exact=True).click()
    heading = page.locator("#post-api-v1-events")
    box = heading.bounding_box()
    assert box and -1 <= box["y"] < height  # the table of contents took the reader to it
    page.get_by_role("link", name="interactive console (Swagger UI)").click()
    page.locator(".opblock").first.wait_for(timeout=15000 * PATIENCE)
