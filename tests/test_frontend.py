"""Front-end budgets that are sizes, not timings: small, self-contained, no build step."""

import re
from pathlib import Path

from service.frontend import PAGES as ROUTES

FRONTEND = Path(__file__).resolve().parents[1] / "frontend"
# Every page the service serves (the lesson route with the lesson there is).
PAGES = [rule.replace("<lesson_id>", "multi-head-attention") for rule in ROUTES]


def module_graph(module: Path, seen: set[Path]) -> set[Path]:
    """`module` and every module it imports, statically or dynamically, relative paths followed."""
    if module not in seen:
        seen.add(module)
        imports = re.findall(
            r"""from\s*["'](\.{1,2}/[^"']+)["']|import\(\s*["'](\.{1,2}/[^"']+)["']""", module.read_text()
        )
        for static, dynamic in imports:
            module_graph((module.parent / (static or dynamic)).resolve(), seen)
    return seen


def shipped(page: str) -> set[Path]:
    """The JS and CSS one page makes the browser load: its stylesheets, its modules and all they
    import; the lesson also embeds the workbench, so its page counts there too."""
    html = (FRONTEND / "pages" / page).read_text()
    files = {FRONTEND / css for css in re.findall(r'href="/static/(css/[^"]+)"', html)}
    for src in re.findall(r'src="/static/(js/[^"]+)"', html):
        files |= module_graph((FRONTEND / src).resolve(), set())
    return files | (shipped("workbench.html") if page == "lesson.html" else set())


def test_what_each_page_ships_in_js_and_css_is_under_150_kb():
    """The budget is what a learner's browser downloads for a page (docs/decisions.md, "The front
    end's size budget is per page"); the whole front end's total is in docs/performance.md."""
    for page in sorted(set(ROUTES.values())):
        files = shipped(page)
        assert any(f.suffix == ".js" for f in files) and all(f.is_file() for f in files), page
        total = sum(f.stat().st_size for f in files)
        assert total < 150 * 1024, (page, total)


def test_the_module_graph_is_followed_through_every_import():
    workbench = shipped("workbench.html")
    assert FRONTEND / "js" / "views" / "dom.js" in workbench  # imported by views the page imports
    assert FRONTEND / "js" / "pages" / "dashboard.js" not in workbench
    assert shipped("workbench.html") < shipped("lesson.html")


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
