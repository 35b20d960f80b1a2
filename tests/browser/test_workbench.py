"""The lesson's manipulations in the real workbench, and every drawn number equals the API's."""

import requests

from .conftest import open_page, wait_until

PATH = "/explorables/multi-head-attention"


def renders(page):
    return int(page.evaluate("Number(document.body.dataset.renders || 0)"))


def cells(page, head):
    return page.eval_on_selector_all(
        f"#heatmap-{head} td.cell", "els => els.map(e => [e.dataset.row, e.dataset.col, Number(e.dataset.value)])"
    )


def edit(page, token, dimension, value):
    before = renders(page)
    page.get_by_label(f"Token {token} dimension {dimension}", exact=True).fill(str(value))
    wait_until(page, f"Number(document.body.dataset.renders || 0) > {before}")


def toggle(page, label):
    before = renders(page)
    page.get_by_label(label, exact=True).click()
    wait_until(page, f"Number(document.body.dataset.renders || 0) > {before}")


def test_inputs_are_labelled_token_t_dimension_d(page, live):
    open_page(page, live, PATH)
    for t in range(1, 4):
        for d in range(1, 5):
            assert page.get_by_label(f"Token {t} dimension {d}", exact=True).count() == 1


def test_changing_the_last_two_coordinates_changes_only_head_2(page, live):
    open_page(page, live, PATH)
    head1, head2 = cells(page, 0), cells(page, 1)
    edit(page, 3, 3, 2.5)
    edit(page, 3, 4, -1.5)
    assert cells(page, 0) == head1
    assert cells(page, 1) != head2


def test_changing_the_first_two_coordinates_changes_only_head_1(page, live):
    open_page(page, live, PATH)
    head1, head2 = cells(page, 0), cells(page, 1)
    edit(page, 2, 1, -2)
    edit(page, 2, 2, 0.7)
    assert cells(page, 1) == head2
    assert cells(page, 0) != head1


def test_turning_the_mask_off_reveals_future_columns(page, live):
    open_page(page, live, PATH)
    future = "#heatmap-0 td.masked"
    assert page.locator(future).count() == 3
    toggle(page, "Causal mask")
    assert page.locator(future).count() == 0
    future = [v for r, c, v in cells(page, 0) if int(c) > int(r)]
    assert len(future) == 3 and all(v > 0 for v in future)


def test_broken_reuse_makes_both_heads_identical(page, live):
    open_page(page, live, PATH)
    assert [v for *_, v in cells(page, 0)] != [v for *_, v in cells(page, 1)]
    toggle(page, "Reuse head 1 features for both heads (broken)")
    assert [v for *_, v in cells(page, 0)] == [v for *_, v in cells(page, 1)]
    assert "dimensions 3–4 are ignored" in page.locator("#status").inner_text()


def test_drawn_numbers_equal_the_apis(page, live):
    open_page(page, live, PATH)
    edit(page, 1, 2, 1.25)
    tokens = [
        [float(page.get_by_label(f"Token {t} dimension {d}", exact=True).input_value()) for d in range(1, 5)]
        for t in range(1, 4)
    ]
    api = requests.post(live.url + "/api/v1/attention", json={"tokens": tokens, "heads": 2}).json()
    for h in range(2):
        for row, col, value in cells(page, h):
            assert value == api["heads"][h]["weights"][int(row)][int(col)]
    shown = page.eval_on_selector_all("#concat td", "els => els.map(e => Number(e.dataset.value))")
    assert shown == [v for row in api["concat"] for v in row]


def test_the_url_hash_reproduces_the_state(page, live, context):
    open_page(page, live, PATH)
    edit(page, 2, 4, 3.5)
    toggle(page, "Causal mask")
    link = page.url
    other = context.new_page()
    other.goto(link)
    other.wait_for_selector("body[data-ready=true]")
    assert other.get_by_label("Token 2 dimension 4", exact=True).input_value() == "3.5"
    assert other.get_by_label("Causal mask", exact=True).is_checked() is False
    assert cells(other, 1) == cells(page, 1)


def test_failure_mode_comparison_marks_the_differences(page, live):
    open_page(page, live, PATH)
    before = renders(page)
    page.get_by_label("Compare with").select_option("no_scaling")
    wait_until(page, f"Number(document.body.dataset.renders || 0) > {before}")
    assert page.locator("#comparison").is_visible()
    assert page.locator("#compare-broken-0 td.changed").count() > 0
    assert page.locator("#compare-correct-0 td.changed").count() == 0
