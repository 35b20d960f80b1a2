"""Front-end budgets that are sizes, not timings: small, self-contained, no build step."""

import re
from pathlib import Path

from service.frontend import PAGES as ROUTES

FRONTEND = Path(__file__).resolve().parents[1] / "frontend"
# Every page the service serves (the lesson route with the lesson there is).
PAGES = [rule.replace("<lesson_id>", "multi-head-attention") for rule in ROUTES]


def test_js_and_css_together_are_under_150_kb():
    total = sum(p.stat().st_size for p in FRONTEND.rglob("*") if p.suffix in (".js", ".css"))
    assert total < 150 * 1024, total


def test_nothing_is_loaded_from_another_origin():
    for path in FRONTEND.rglob("*"):
        if path.suffix in (".js", ".css", ".html"):
            text = path.read_text()
            assert not re.search(
                r"""(src|href)=["']https?://|url\(["']?https?://|import .* from ["']https?://""", text
            ), path


def test_every_page_route_serves_html(client):
    for path in PAGES:
        response = client.get(path)
        assert response.status_code == 200 and response.mimetype == "text/html", path
        response.close()
    assert client.get("/lessons/no-such-lesson").status_code == 404


def test_static_files_are_served_and_paths_are_confined(client):
    response = client.get("/static/js/api.js")
    assert response.status_code == 200 and "javascript" in response.mimetype
    response.close()
    assert client.get("/static/../service/config.py").status_code == 404
    assert client.get("/static/pages/index.html").status_code == 404
