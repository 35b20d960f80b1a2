"""The trained-heads page: each head drawn with its measured label, a byte chosen by mouse or
keyboard shows where every head sends it, and the induction head points where it should."""

from __future__ import annotations

import re
from urllib.parse import urlencode

import pytest

from service.models import encoder

from .conftest import PATIENCE, open_page, wait_until

REPEAT = "Kx7#qPz2!mW4vR9&Kx7#qPz2!mW4vR9&"  # the page's first example: 16 bytes typed twice


def reads(page, layer: int, head: int) -> str:
    return page.locator(f"figure.th-head[data-layer='{layer}'][data-head='{head}'] .th-reads").inner_text()


def test_every_head_is_drawn_with_its_label(page, live):
    open_page(page, live, "/explorables/trained-heads")
    heads = page.locator("figure.th-head")
    assert heads.count() == 8
    labels = [heads.nth(i).get_attribute("data-label") for i in range(8)]
    assert "previous token" in labels[:4] and "induction" in labels[4:]
    assert page.locator("canvas.th-canvas[role=img]").count() == 8
    assert page.locator("#tokens button.th-token").count() == len(REPEAT)


def test_choosing_a_byte_by_keyboard_or_mouse_shows_where_each_head_sends_it(page, live):
    open_page(page, live, "/explorables/trained-heads")
    page.locator("#tokens button.th-token").nth(4).focus()
    wait_until(page, "document.querySelector('.th-token[aria-pressed=true]')?.dataset.index === '4'")
    assert page.locator("#reading").inner_text() == "byte 5 “q” chosen."
    page.keyboard.press("ArrowRight")
    wait_until(page, "document.activeElement.dataset.index === '5'")
    assert "byte 6 “P” →" in reads(page, 0, 0)
    assert page.url.endswith("&byte=6")  # kept in the URL, 1-based
    page.locator("#tokens button.th-token").nth(9).hover()
    wait_until(page, "document.querySelector('.th-token[aria-pressed=true]')?.dataset.index === '9'")
    rows = page.locator("#table table tbody tr")
    assert rows.count() == 8 and rows.nth(0).locator("td").count() == 10  # byte 10 sees bytes 1..10


def test_the_induction_head_points_after_the_earlier_occurrence(page, live):
    open_page(page, live, "/explorables/trained-heads")
    layer, head = next(
        (int(f.get_attribute("data-layer")), int(f.get_attribute("data-head")))
        for f in page.locator("figure.th-head[data-label='induction']").all()
    )
    for position in (20, 25, 29):  # 0-based, in the second copy: the same byte sits at position - 16
        page.locator("#tokens button.th-token").nth(position).focus()
        wait_until(page, f"document.querySelector('.th-token[aria-pressed=true]')?.dataset.index === '{position}'")
        target = re.search(r"→ byte (\d+) ", reads(page, layer, head))
        assert target and int(target.group(1)) - 1 == position - 16 + 1, reads(page, layer, head)


def test_typing_text_redraws_and_reports_a_parameter_change(page, live):
    open_page(page, live, "/explorables/trained-heads")
    page.fill("#text", "abcabc")
    wait_until(page, "document.querySelectorAll('#tokens .th-token').length === 6")
    assert page.locator("#bytes").inner_text() == "6 of 128 bytes"
    page.fill("#text", "é" * 65)
    wait_until(page, "document.getElementById('status').textContent.includes('at most 128')")
    learner = page.evaluate("fetch('/api/v1/session').then(r => r.json()).then(s => s.learner)")
    url = f"/api/v1/learners/{learner}/events"
    mine = "e => e.instance_id === 'trained-heads'"
    stored = f"fetch('{url}').then(r => r.json()).then(b => (b.events || []).filter({mine}))"
    wait_until(page, f"{stored}.then(found => found.length > 0)", timeout=15.0)
    changes = page.evaluate(stored)
    assert changes[-1]["data"]["parameter"] == "model_text" and "text" not in changes[-1]["data"]  # never the text


def test_the_prediction_follows_the_chosen_byte_and_examples_keep_what_they_are(page, live):
    import requests

    open_page(page, live, "/explorables/trained-heads")
    page.locator("#tokens button.th-token").nth(17).focus()  # "x" in the second copy
    wait_until(page, "document.querySelector('.th-token[aria-pressed=true]')?.dataset.index === '17'")
    assert page.locator("#next-title").inner_text() == "What the model expects after byte 18 “x”"
    prefix = requests.post(
        f"{live.url}/api/v1/models/bytes-2l-attn/attention", json={"text": REPEAT[:18]}, timeout=10
    ).json()["next"]
    shown = page.locator("#next li").all_inner_texts()
    assert [s.split("”")[0].lstrip("“") for s in shown] == [p["text"] for p in prefix]  # as if the text ended there
    assert shown[0].startswith("“7”")  # what followed "x" in the first copy

    seen = set()
    for _ in range(2):  # a random string, typed twice, new each time
        page.get_by_role("button", name="A random string typed twice").click()
        wait_until(page, "document.querySelectorAll('#tokens .th-token').length === 32")
        text = page.locator("#text").input_value()
        assert text[:16] == text[16:] and text != REPEAT
        seen.add(text)
    assert len(seen) == 2

    page.get_by_role("button", name="Code").click()
    wait_until(page, "[...document.querySelectorAll('#tokens .th-token')].some(b => b.textContent === '↵')")
    assert "\n" in page.locator("#text").input_value()  # the newline is kept, and shown as ↵
    assert "mean weight it puts where" in page.locator("#score-note").inner_text()  # "score" is defined


def line_to(page, head: int) -> int:
    """The token the head view's line for `head` is most opaque towards (0-based)."""
    return page.evaluate(
        """head => {
          const lines = [...document.querySelectorAll(`#lines line[data-head="${head}"]`)];
          lines.sort((a, b) => b.getAttribute('stroke-opacity') - a.getAttribute('stroke-opacity'));
          return Number(lines[0].dataset.key);
        }""",
        head,
    )


def test_the_head_view_draws_where_each_head_sends_the_chosen_byte(page, live):
    open_page(page, live, "/explorables/trained-heads")
    page.locator("#tokens button.th-token").nth(9).click()  # by pointer
    wait_until(page, "document.querySelector('.th-token[aria-pressed=true]')?.dataset.index === '9'")
    assert line_to(page, 0) == 8  # layer 1's previous-token head: to byte 9
    page.keyboard.press("ArrowRight")  # and by keyboard
    wait_until(page, "document.querySelector('.th-token[aria-pressed=true]')?.dataset.index === '10'")
    assert line_to(page, 0) == 9
    page.get_by_label("Layer", exact=True).select_option("1")
    page.locator("#tokens button.th-token").nth(20).focus()
    wait_until(page, "document.querySelector('.th-token[aria-pressed=true]')?.dataset.index === '20'")
    induction = int(
        page.locator("figure.th-head[data-layer='1'][data-label='induction']").first.get_attribute("data-head")
    )
    assert line_to(page, induction) == 20 - 16 + 1  # the byte after the earlier copy
    assert page.locator("#lines [role=img]").get_attribute("aria-label").startswith("Where each head of layer 2")


def test_switching_off_the_previous_token_head_breaks_the_induction_heads_on_the_page(page, live):
    open_page(page, live, "/explorables/trained-heads")
    previous = page.locator("figure.th-head[data-layer='0'][data-label='previous token']").first
    name = f"Switch off Layer 1 head {int(previous.get_attribute('data-head')) + 1}"
    page.get_by_label(name, exact=True).check()
    wait_until(page, "document.querySelector('figure.th-head.off') !== null")
    assert "off=0." in page.url
    for figure in page.locator("figure.th-head[data-layer='1'][data-label='induction']").all():
        caption = figure.locator("figcaption").inner_text()
        before, after = (
            float(x) for x in re.search(r"score (\d\.\d+) → (\d\.\d+) with the heads off", caption).groups()
        )
        assert after <= before / 2, caption
    page.reload()  # the URL keeps it
    page.wait_for_selector("main[aria-busy=false]")
    assert page.get_by_label(name, exact=True).is_checked()


def test_a_head_opens_and_bytes_are_grouped_by_character(page, live):
    open_page(page, live, "/explorables/trained-heads")
    toggle = page.locator("figure.th-head[data-layer='0'][data-head='0'] figcaption button")
    toggle.click()
    assert toggle.get_attribute("aria-expanded") == "true"
    assert "open" in page.locator("figure.th-head[data-layer='0'][data-head='0']").get_attribute("class")
    page.fill("#text", "né!")
    wait_until(page, "document.querySelectorAll('#tokens .th-token').length === 4")
    group = page.locator("#tokens .th-char")
    assert group.count() == 1 and group.get_attribute("aria-label") == "“é”: 2 bytes"
    assert group.locator("button").all_inner_texts() == ["\\xc3", "\\xa9"]  # its UTF-8 bytes, never �
    assert "�" not in page.locator("#tokens").inner_text()


needs_minilm = pytest.mark.skipif(
    not encoder.available(),
    reason="the minilm extra is not installed (make minilm; .ci/run installs it)",
)
SENTENCE = "The cat sat on the mat because it was warm."


@needs_minilm
@pytest.mark.parametrize("width, height", [(1280, 800), (390, 844)])
def test_the_encoder_model_view_and_head_view(page, live, width, height):
    from axe_playwright_python.sync_playwright import Axe

    page.set_viewport_size({"width": width, "height": height})
    open_page(page, live, "/explorables/trained-heads#" + urlencode({"model": "all-minilm-l6-v2", "text": SENTENCE}))
    assert page.locator("#model").input_value() == "all-minilm-l6-v2"
    assert page.locator("figure.th-head").count() == 72 and page.locator("#layers h2").count() == 6
    pieces = page.locator("#tokens button.th-token").all_inner_texts()
    assert pieces[0] == "[CLS]" and pieces[-1] == "[SEP]" and "cat" in pieces
    assert page.locator("figure.th-head[data-layer='0'][data-head='2']").get_attribute("data-label") == "previous token"
    page.locator("#tokens button.th-token").nth(3).focus()  # "sat"
    wait_until(page, "document.querySelector('.th-token[aria-pressed=true]')?.dataset.index === '3'")
    page.keyboard.press("ArrowRight")
    wait_until(page, "document.querySelector('.th-token[aria-pressed=true]')?.dataset.index === '4'")
    assert page.locator("#reading").inner_text() == "piece 5 “on” chosen."
    assert line_to(page, 2) == 3  # layer 1 head 3: the piece before
    page.locator("#tokens button.th-token").nth(6).click()  # by pointer too: "mat"
    wait_until(page, "document.querySelector('.th-token[aria-pressed=true]')?.dataset.index === '6'")
    assert line_to(page, 2) == 5
    page.keyboard.press("ArrowLeft")
    wait_until(page, "document.querySelector('.th-token[aria-pressed=true]')?.dataset.index === '5'")
    assert page.locator("#table table tbody tr").first.locator("td").count() == len(pieces)  # sees after, too
    assert not page.locator("#next-title").is_visible()  # an encoder predicts no next token
    assert page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth") == 0
    bad = [v["id"] for v in Axe().run(page).response["violations"] if v["impact"] in ("serious", "critical")]
    assert bad == []


@needs_minilm
def test_the_model_picker_switches_models_and_the_url_keeps_the_choice(page, live):
    open_page(page, live, "/explorables/trained-heads")
    page.get_by_label("Model", exact=True).select_option("all-minilm-l6-v2")
    wait_until(page, "document.querySelectorAll('figure.th-head').length === 72")
    assert "model=all-minilm-l6-v2" in page.url
    assert page.locator("#unit-title").inner_text() == "Word pieces"
    page.get_by_label("Model", exact=True).select_option("bytes-2l-attn")
    wait_until(page, "document.querySelectorAll('figure.th-head').length === 8")


@pytest.mark.parametrize("width", [1280, 390])
def test_the_heatmaps_of_a_row_align_whatever_their_titles_length(page, live, width):
    page.set_viewport_size({"width": width, "height": 900})
    open_page(page, live, "/explorables/trained-heads")
    tops = page.eval_on_selector_all(
        "figure.th-head:not(.open)",
        "els => els.map(f => [Math.round(f.getBoundingClientRect().top),"
        " f.querySelector('canvas').getBoundingClientRect().top])",
    )
    rows: dict[int, list[float]] = {}
    for figure_top, canvas_top in tops:
        rows.setdefault(figure_top, []).append(canvas_top)
    assert any(len(canvases) > 1 for canvases in rows.values())  # heads side by side
    for canvases in rows.values():
        assert max(canvases) - min(canvases) < 1, canvases


def test_every_heads_lines_in_the_head_view_stay_visible_and_apart(page, live):
    open_page(page, live, "/explorables/trained-heads")
    page.locator("#tokens button.th-token").nth(20).click()
    wait_until(page, "document.querySelector('.th-token[aria-pressed=true]')?.dataset.index === '20'")
    lines = page.eval_on_selector_all(
        "#lines line",
        "els => els.map(l => [Number(l.dataset.head), Number(l.dataset.key), Number(l.getAttribute('stroke-opacity')),"
        " Number(l.getAttribute('y2'))])",
    )
    assert {head for head, *_ in lines} == set(range(4))  # every head of the layer draws
    assert min(opacity for *_, opacity, _ in lines) >= 0.3
    ends = {}
    for _head, key, _, y2 in lines:
        ends.setdefault(key, set()).add(y2)
    for key, ys in ends.items():  # heads that agree on a key end side by side, not on top of each other
        assert len(ys) == len([1 for _, k, _, _ in lines if k == key]), key


def test_an_ablation_that_takes_a_moment_says_it_is_measuring(page, live):
    open_page(page, live, "/explorables/trained-heads")

    def slowly(route):  # a cold ablation: the server measures every head's scores again
        if '"ablate": [{' in (route.request.post_data or "").replace('"ablate":[{', '"ablate": [{'):
            page.wait_for_timeout(1200)
        route.continue_()

    page.route("**/api/v1/models/*/attention", slowly)
    page.get_by_label("Switch off Layer 1 head 1", exact=True).check()
    page.wait_for_selector("main[aria-busy=true]", timeout=3000 * PATIENCE)
    assert "Measuring every head's scores again" in page.locator("#status").inner_text()
    page.wait_for_selector("main[aria-busy=false]", timeout=10000 * PATIENCE)
    assert page.locator("#status").inner_text() == ""
    assert page.locator("figure.th-head.off").count() == 1
