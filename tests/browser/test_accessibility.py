"""axe-core on every page: no serious or critical violations, at desktop and phone width."""

import pytest
from axe_playwright_python.sync_playwright import Axe

from ..test_frontend import PAGES
from .conftest import open_page


@pytest.mark.parametrize("width, height", [(1280, 800), (390, 844)])
@pytest.mark.parametrize("path", PAGES)
def test_no_serious_or_critical_axe_violations(page, live, path, width, height):
    page.set_viewport_size({"width": width, "height": height})
    open_page(page, live, path)
    results = Axe().run(page)
    bad = [
        (v["id"], v["impact"], len(v["nodes"]))
        for v in results.response["violations"]
        if v["impact"] in ("serious", "critical")
    ]
    assert bad == [], bad


def test_every_heatmap_has_a_table_and_a_summary(page, live):
    open_page(page, live, "/explorables/multi-head-attention")
    figures = page.locator("[data-stage=weights] figure.heatmap-figure")
    assert figures.count() == 2
    for i in range(2):
        figure = figures.nth(i)
        assert figure.locator("table caption").count() == 1
        assert figure.locator("th[scope=col]").count() == 4
        assert figure.locator(".summary").inner_text().startswith("query 3 puts ")
