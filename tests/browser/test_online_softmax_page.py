"""The online softmax explorable and its lesson, as a learner uses them: every number drawn is the API's
(each tile's status, each row's m, alpha, l and O~ before and after it, the final division beside the
plain pass), a broken loop marks the tile where it first parts, the URL keeps the view, and the lesson's
three checkpoints complete in a browser at both sizes and in all three languages."""

from __future__ import annotations

import pytest
import requests
from playwright.sync_api import expect

from .conftest import completed, computed, open_page, predict_in_lesson, values, wait_for_checkpoint, wait_until
from .test_layout import SIZES, overflow

PATH = "/explorables/online-softmax"
LESSON = "/lessons/online-softmax"


def tiled(live, block, failure_mode=None):
    preset = requests.get(live.url + "/api/v1/presets/online-softmax").json()["request"]
    body = {"tokens": preset["tokens"], "heads": 2, "causal": True, "block_q": block, "block_k": block}
    if failure_mode:
        body["failure_mode"] = failure_mode
    return computed(live, "/api/v1/attention/tiled", body)


@pytest.mark.parametrize("size", SIZES)
def test_each_step_draws_the_apis_running_values_and_the_end_the_plain_output(page, live, size):
    page.set_viewport_size(dict(zip(("width", "height"), SIZES[size], strict=True)))
    answer = tiled(live, 2)
    head = answer["heads"][1]
    open_page(page, live, f"{PATH}#block=2&head=1")
    cells = page.locator("[data-stage=tiles] td")
    statuses = cells.evaluate_all("cs => cs.map(c => [c.dataset.tile, c.dataset.status])")
    assert {int(k): s for k, s in statuses} == {k: tile["status"] for k, tile in enumerate(head["tiles"])}
    previous = {}
    for k, tile in enumerate(head["tiles"]):
        page.get_by_role("button", name="Compute the next tile").click()
        wait_until(page, f"document.querySelector('#position').textContent.includes('Tile {k + 1} of 16')")
        running = page.locator("[data-stage=running]")
        assert running.get_attribute("data-status") == tile["status"]
        if tile["status"] == "skipped":
            continue
        for name in ("m", "alpha", "l"):
            assert values(running.locator(f"td[data-stage={name}]")) == tile[name], (k, name)
        assert values(running.locator("td[data-stage=o_tilde]")) == [v for row in tile["o_tilde"] for v in row]
        before = previous.get(tile["query_block"])
        expected_before = before["m"] if before else [None] * len(tile["m"])
        assert values(running.locator("td[data-stage=m-before]")) == expected_before
        previous[tile["query_block"]] = tile
    final = page.locator("[data-stage=final]")
    assert values(final.locator("td[data-stage=output]")) == [v for row in head["output"] for v in row]
    equality = page.locator("[data-stage=equality]")
    assert float(equality.get_attribute("data-value")) == answer["max_difference_from_plain"] <= 1e-14
    assert page.get_by_role("button", name="Compute the next tile").is_disabled()
    assert overflow(page) == 0


def test_a_broken_loop_marks_the_tile_where_it_first_parts(page, live):
    open_page(page, live, f"{PATH}#compare=online_no_rescale&block=2")
    first = tiled(live, 2, "online_no_rescale")["first_difference"]
    marked = page.locator("[data-stage=tiles] td.first-difference").evaluate_all("cs => cs.map(c => c.dataset.tile)")
    assert first["head"] == 0 and set(marked) == {str(first["tile"])}
    equality = page.locator("[data-stage=equality]")
    expect(equality).to_contain_text(f"at tile {first['tile'] + 1} (head 1)")
    assert float(equality.get_attribute("data-value")) > 0.01


def test_changing_the_block_size_keeps_the_output_and_the_link_keeps_the_view(page, live):
    open_page(page, live, PATH)
    page.get_by_label("Block size").select_option("3")
    wait_until(page, "document.querySelector('#counts').textContent.startsWith('6 tiles computed')")
    assert "block=3" in page.url and page.locator("#position").inner_text() == "Before the first tile"
    assert page.locator("[data-stage=tiles] td[data-tile='8']").count() > 0  # ceil(8 / 3) = 3 tiles a side
    counts = page.locator("#counts").inner_text()
    assert counts.startswith("6 tiles computed (3 of them masked on the diagonal), 3 skipped")
    again = page.context.new_page()
    again.goto(page.url)
    again.wait_for_selector("main[aria-busy=false]")
    assert again.get_by_label("Block size").input_value() == "3"
    again.close()


def test_the_learners_own_tokens_ride_in_the_link(page, live):
    open_page(page, live, f"{PATH}#t=1,0,1,0;0,1,0,1;1,1,0,0&block=1&tile=12")
    assert page.locator("[data-stage=tiles] tbody tr").count() == 3
    assert page.locator("#position").inner_text() == "Tile 9 of 9"  # 9 tiles a head at 1 x 1: 12 is past the end
    assert page.locator("[data-stage=final]").count() == 1


EXPLANATIONS = {
    "en": "Each tile rescales l and the output by alpha = exp(m - m_new) when the maximum rises, so the sum stays "
    "exact; without the rescale the sum mixes two scales.",
    "es": "Cada bloque reescala la suma l por alfa = exp(m - m_new) cuando sube el máximo, así la suma sigue exacta; "
    "sin reescalar mezcla dos escalas.",
    "zh-CN": "每个块在最大值上升时用 exp(m - m_new) 缩放和 l，所以和保持精确；如果不缩放，和就混合了两种尺度。",
}


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("locale", ["en", "es", "zh-CN"])
def test_a_new_learner_completes_the_online_softmax_lesson(page, live, locale, size):
    said = "6 skipped, 4 masked; 120 skipped of 256 at 1,024 positions."
    frame, explanation, record_explanation = predict_in_lesson(page, live, LESSON, locale, SIZES[size], said)
    frame.locator("#step").click()  # a tile
    frame.locator("#block").select_option("8")  # one tile a head
    frame.locator("#step").click()  # ... and its end: the final division
    frame.locator("#compare").select_option("online_max_not_carried")  # break it
    wait_for_checkpoint(page, "experiment")
    assert frame.locator("[data-manipulation][data-done=true]").count() == 4
    page.get_by_label(explanation).fill(EXPLANATIONS[locale])
    page.get_by_role("button", name=record_explanation).click()
    wait_for_checkpoint(page, "explain")
    assert completed(page) == {"predict", "experiment", "explain"}
    assert overflow(page) == 0
