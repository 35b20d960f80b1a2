"""Front-end budgets that are sizes, not timings: small, self-contained, no build step."""

import gzip
import re
from pathlib import Path

from service.frontend import PAGES as ROUTES
from service.i18n import LOCALES
from service.i18n_catalogs import module_graph

FRONTEND = Path(__file__).resolve().parents[1] / "frontend"
# Every page the service serves (the lesson route with the lesson there is).
PAGES = [rule.replace("<lesson_id>", "multi-head-attention") for rule in ROUTES]


ROUTE_OF = {page: rule.replace("<lesson_id>", "multi-head-attention") for rule, page in ROUTES.items()}


def shipped(client, page: str, lang: str = "en") -> set[Path]:
    """The JS, CSS and catalog one page, as served in `lang`, makes the browser load: its
    stylesheets, its modules and all they import, its language's catalog; the lesson also embeds
    the workbench, so its page counts there too."""
    html = client.get(f"{ROUTE_OF[page]}?lang={lang}").get_data(as_text=True)
    files = {FRONTEND / path for path in re.findall(r'href="/static/((?:css|i18n)/[^"]+)"', html)}
    for src in re.findall(r'src="/static/(js/[^"]+)"', html):
        files |= module_graph((FRONTEND / src).resolve())
    return files | (shipped(client, "workbench.html", lang) if page == "lesson.html" else set())


def test_what_each_page_ships_in_js_css_and_its_catalog_is_under_88_kib_gzipped(client):
    """The budget is what a learner's browser downloads for a page (docs/decisions.md, "The front
    end's size budget is per page"): each file as the service sends it to a browser that accepts gzip,
    in the language with the largest catalog; the whole front end's total is in docs/performance.md."""
    offered = [tag for tag in LOCALES if tag != "en"]  # not the pseudo-locale
    largest = max(offered, key=lambda tag: sum(f.stat().st_size for f in (FRONTEND / "i18n" / tag).glob("*.json")))
    for page in sorted(set(ROUTES.values())):
        files = shipped(client, page, largest)
        assert any(f.suffix == ".js" for f in files) and all(f.is_file() for f in files), page
        assert any(f.parent == FRONTEND / "i18n" / largest for f in files), page  # its catalog counts
        total = sum(len(client.get(static_url(f), headers={"Accept-Encoding": "gzip"}).data) for f in files)
        assert total < 88 * 1024, (page, total)


def static_url(path: Path) -> str:
    return "/static/" + path.relative_to(FRONTEND).as_posix()


def test_modules_stylesheets_and_catalogs_are_sent_gzipped_to_browsers_that_accept_it(client):
    """About a quarter of the bytes, for the same file: a browser that does not accept gzip gets it as it is."""
    url = "/static/js/pages/workbench.js"
    plain = client.get(url)
    zipped = client.get(url, headers={"Accept-Encoding": "gzip, br"})
    assert plain.headers.get("Content-Encoding") is None and zipped.headers["Content-Encoding"] == "gzip"
    assert gzip.decompress(zipped.data) == plain.data == (FRONTEND / "js" / "pages" / "workbench.js").read_bytes()
    assert len(zipped.data) < len(plain.data) / 2
    assert "Accept-Encoding" in zipped.headers["Vary"] and "Accept-Encoding" in plain.headers["Vary"]
    again = client.get(url, headers={"Accept-Encoding": "gzip", "If-None-Match": zipped.headers["ETag"]})
    assert again.status_code == 304
    assert client.get("/static/js/../../service/app.py", headers={"Accept-Encoding": "gzip"}).status_code == 404


def test_the_module_graph_is_followed_through_every_import(client):
    workbench = shipped(client, "workbench.html")
    assert FRONTEND / "js" / "views" / "dom.js" in workbench  # imported by views the page imports
    assert FRONTEND / "js" / "pages" / "dashboard.js" not in workbench
    assert shipped(client, "workbench.html") < shipped(client, "lesson.html")


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


BROWSER = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}


def test_an_unknown_page_is_a_page_with_a_way_home_for_a_browser(client):
    for path in ("/no/such/page", "/lessons/no-such-lesson", "/explorables/nothing"):
        answer = client.get(path, headers=BROWSER)
        assert answer.status_code == 404 and answer.mimetype == "text/html", path
        html = answer.get_data(as_text=True)
        assert '<a href="/">' in html and "<h1>" in html and 'data-page="not-found"' in html
        assert "<script" not in html  # nothing to run: no catalog to fetch either


def test_an_unknown_page_is_in_the_learners_language(client):
    answer = client.get("/no/such/page?lang=es", headers=BROWSER)
    assert answer.status_code == 404 and answer.headers["Content-Language"] == "es"
    assert "Aquí no hay ninguna página" in answer.get_data(as_text=True)


def test_api_clients_and_api_paths_get_the_problem_document(client):
    for path, accept in (
        ("/no/such/page", "application/json"),
        ("/no/such/page", "*/*"),
        ("/api/v1/no-such-thing", BROWSER["Accept"]),
        ("/no/such/page", None),
    ):
        answer = client.get(path, headers={"Accept": accept} if accept else {})
        assert answer.status_code == 404 and answer.mimetype == "application/problem+json", (path, accept)
        assert answer.json["status"] == 404


def test_only_the_codec_reads_or_writes_a_url_hash():
    """hash-state.js loads, saves and follows a page's hash and sends a state to an embedded page;
    no other module touches a hash, so a link always means what the codec says it means."""
    touching = re.compile(r"location\.hash|hashchange|history\.(replaceState|pushState)")
    found = sorted(
        str(path.relative_to(FRONTEND)) for path in (FRONTEND / "js").rglob("*.js") if touching.search(path.read_text())
    )
    assert found == ["js/hash-state.js"]


def test_one_marker_for_strings_translated_where_they_are_shown_and_one_checklist_restore():
    texts = {str(p.relative_to(FRONTEND)): p.read_text() for p in (FRONTEND / "js").rglob("*.js")}
    assert [name for name, text in texts.items() if re.search(r"(const|function) N_\b", text)] == ["js/i18n.js"]
    assert [name for name, text in texts.items() if "done.add(e.data.manipulation)" in text] == [
        "js/views/checklist.js"
    ]
