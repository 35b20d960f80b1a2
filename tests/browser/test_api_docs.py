"""The API docs page renders offline under the service's Content-Security-Policy."""


def test_swagger_ui_renders_every_operation(page, live):
    messages = []
    page.on("console", lambda m: messages.append(m.text) if m.type == "error" else None)
    page.goto(live.url + "/api/docs")
    page.locator(".opblock").first.wait_for(timeout=15000)
    assert page.locator(".opblock").count() >= 20
    assert not [m for m in messages if "Content Security Policy" in m], messages
