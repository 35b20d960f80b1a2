"""Every page at 1280x800 and on a 390x844 phone: nothing scrolls sideways, no heatmap lies on
another, and in the lesson the edited input and both heads' weights share the screen.

Screenshots of every page at both sizes are taken here; with WORKBENCH_UPDATE_SCREENSHOTS=1
(`make screenshots`) they replace the ones in docs/screenshots/ that the README shows.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest

from .conftest import PATIENCE, demo_cohort, embedded_workbench, open_page, wait_until

PAGES = {
    "index": "/",
    "lesson": "/lessons/multi-head-attention",
    "workbench": "/explorables/multi-head-attention",
    "four-heads": "/figures/four-heads",
    "trained-heads": "/explorables/trained-heads",
    "kv-cache": "/explorables/kv-cache#window=3&sinks=1&logit=1&position=6",
    "kv-lesson": "/lessons/kv-cache-and-latent-attention",
    "online-softmax": "/explorables/online-softmax",
    "online-lesson": "/lessons/online-softmax",
    "long-lesson": "/lessons/long-context",
    "rope-scaling": "/explorables/rope-scaling#offset=96&scaling=yarn",
    "rope-lesson": "/lessons/rope-scaling",
    "inside-the-model": "/explorables/inside-the-model#cell=1.1.12",
    "inside-lesson": "/lessons/inside-the-model",
    "speculative-decoding": "/explorables/speculative-decoding#compare=shared_uniform",
    "speculative-lesson": "/lessons/speculative-decoding",
    "dashboard": "/dashboard",
    "api-docs": "/api/docs",
    "api-console": "/api/docs/try",
}
SIZES = {"desktop": (1280, 800), "phone": (390, 844)}
DOCS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


@pytest.fixture(scope="module")
def analytics_key(live):
    """A demo cohort and an analytics key, so the dashboard is measured with its charts drawn."""
    (token,) = demo_cohort(live, 120, 11, "layout-school")
    return token


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    return DOCS if os.environ.get("WORKBENCH_UPDATE_SCREENSHOTS") == "1" else tmp_path_factory.mktemp("shots")


def load(page, live, path):
    if path == "/api/docs/try":  # Swagger UI: no ready mark of ours
        page.goto(live.url + path)
        page.wait_for_selector(".swagger-ui .opblock", timeout=15000 * PATIENCE)
    else:
        open_page(page, live, path)


def overflow(target) -> int:
    """How far the page scrolls sideways (0: not at all)."""
    return target.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")


def heatmap_boxes(page):
    return [b for b in (t.bounding_box() for t in page.locator("table.heatmap").all()) if b and b["width"]]


def overlapping(boxes):
    return [
        (a, b)
        for a, b in itertools.combinations(boxes, 2)
        if a["x"] < b["x"] + b["width"] - 0.5
        and b["x"] < a["x"] + a["width"] - 0.5
        and a["y"] < b["y"] + b["height"] - 0.5
        and b["y"] < a["y"] + a["height"] - 0.5
    ]


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("name", PAGES)
def test_no_sideways_scrolling_no_overlap_and_a_screenshot(page, live, shots, analytics_key, name, size):
    width, height = SIZES[size]
    page.set_viewport_size({"width": width, "height": height})
    load(page, live, PAGES[name])
    if name == "dashboard":
        page.get_by_label("Analytics key (kept for this tab only)").fill(analytics_key)
        page.get_by_role("button", name="Show analytics").click()
        page.locator("#mistakes table").wait_for(state="attached")
    assert overflow(page) == 0, f"{PAGES[name]} scrolls sideways by {overflow(page)} px at {width} px"
    assert not overlapping(heatmap_boxes(page))
    if name == "lesson":
        embedded_workbench(page)
        assert overflow(page.frame("workbench")) == 0
    path = shots / f"{name}-{size}.png"
    page.screenshot(path=str(path), full_page=name not in ("lesson", "api-docs", "api-console"))
    assert path.stat().st_size > 10_000


@pytest.mark.parametrize("width", [320, 390, 768, 1024, 1280, 1920])
def test_the_four_heads_never_overlap_or_spill(page, live, width):
    page.set_viewport_size({"width": width, "height": 900})
    open_page(page, live, "/figures/four-heads")
    boxes = heatmap_boxes(page)
    assert len(boxes) == 4 and not overlapping(boxes)
    assert overflow(page) == 0
    # Each heatmap stays inside its own figure (a six-column table scrolls within it on a narrow phone).
    for i in range(4):
        figure = page.locator("figure.head-figure").nth(i).bounding_box()
        region = page.locator("figure.head-figure").nth(i).locator(".scroll-region").bounding_box()
        assert region["x"] >= figure["x"] - 0.5 and region["x"] + region["width"] <= figure["x"] + figure["width"] + 0.5


@pytest.mark.parametrize("size", SIZES)
def test_in_the_lesson_the_edited_input_and_both_heads_share_the_screen(page, live, size):
    page.set_viewport_size(dict(zip(("width", "height"), SIZES[size], strict=True)))
    open_page(page, live, "/lessons/multi-head-attention")
    frame_element = page.locator("#workbench-frame")
    frame_element.scroll_into_view_if_needed()
    frame = embedded_workbench(page)
    inner = page.frame("workbench")
    before = int(inner.evaluate("performance.getEntriesByName('workbench-render').length"))
    frame.get_by_label("Token 2 dimension 3", exact=True).fill("2.5")
    wait_until(inner, f"performance.getEntriesByName('workbench-render').length > {before}")
    page.wait_for_timeout(300)  # let the host apply the workbench's scroll request
    offset = frame_element.bounding_box()
    viewport = page.viewport_size

    def on_screen(selector):
        box = frame.locator(selector).bounding_box()  # Playwright reports it in the top page's coordinates
        assert box is not None, selector
        return box["y"] >= -0.5 and box["y"] + box["height"] <= viewport["height"] + 0.5

    assert on_screen("#token-2-dim-3"), "the edited input is off screen"
    assert on_screen("#heatmap-0") and on_screen("#heatmap-1"), "a head's weights are off screen"
    scroll_height, client_height = inner.evaluate(
        "[document.documentElement.scrollHeight, document.documentElement.clientHeight]"
    )
    assert scroll_height <= client_height, "the iframe scrolls inside the page"
    assert offset["height"] >= scroll_height
    # The change is marked where the learner looks: head 2's cells changed, head 1's did not.
    assert frame.locator("#heatmap-1 td.changed").count() > 0
    assert frame.locator("#heatmap-0 td.changed").count() == 0


def test_every_stage_opens_its_numbers_with_one_keystroke(page, live):
    open_page(page, live, "/explorables/multi-head-attention")
    numbers = page.locator('[data-stage=scores][data-head="0"] .stage-numbers')
    assert not numbers.is_visible()
    button = page.locator('[data-stage=scores][data-head="0"] .stage-open')
    button.focus()
    page.keyboard.press("Enter")
    wait_until(page, "document.querySelector('[data-stage=scores][data-head=\"0\"] .stage-numbers').hidden === false")
    assert numbers.locator("td.masked").count() == 3
    assert page.locator('[data-stage=scores][data-head="0"] .stage-open').get_attribute("aria-expanded") == "true"
    assert page.locator(".legend").is_visible()


def test_show_every_number_opens_the_rest_when_some_are_open_and_closes_them_all_after(page, live):
    open_page(page, live, "/explorables/multi-head-attention")
    page.locator('[data-stage=scores][data-head="0"] .stage-open').click()
    wait_until(page, "document.querySelectorAll('.stage.open').length === 1")
    every = page.get_by_role("button", name="Show every number")
    assert every.get_attribute("aria-pressed") == "false"
    every.click()  # one was open: the rest open too (it used to close that one)
    wait_until(page, "document.querySelectorAll('.stage.open').length > 10")
    assert every.get_attribute("aria-pressed") == "true"
    every.click()
    wait_until(page, "document.querySelectorAll('.stage.open').length === 0")


def stage_boxes(target):
    """The boxes of the drawn stage panels (each stage element, and the projections block)."""
    boxes = target.eval_on_selector_all(
        "[data-stage], [data-part=projections]",
        "els => els.map(e => e.getBoundingClientRect()).filter(r => r.width && r.height)"
        ".map(r => ({x: r.x, y: r.y, width: r.width, height: r.height}))",
    )
    return boxes


@pytest.mark.parametrize("size", SIZES)
def test_in_the_lesson_no_two_stage_panels_overlap(page, live, size):
    page.set_viewport_size(dict(zip(("width", "height"), SIZES[size], strict=True)))
    open_page(page, live, "/lessons/multi-head-attention")
    embedded_workbench(page)
    inner = page.frame("workbench")
    inner.get_by_role("button", name="Show every number").click()
    wait_until(inner, "document.querySelectorAll('.stage.open').length > 10")
    boxes = stage_boxes(inner)
    assert len(boxes) == 18  # X, the projections, six per head, concat, W_O, Y and X + Y
    assert overlapping(boxes) == []
    assert overflow(inner) == 0 and overflow(page) == 0


WIRE_ENDS = {  # a wire's end name -> the element it must touch
    "x": ".stream-x",
    "projections": "[data-part=projections]",
    "concat": '[data-stage="concat"]',
    "wo": '[data-stage="wo"]',
    "output": '[data-stage="output"]',
    "plus": ".plus",
}
PER_LANE = {"lane": ".lane[data-head='{h}']", "qkv": ".lane[data-head='{h}'] .qkv-group"}


def wires(page):
    """Every drawn wire: its from and to names and how far each end lies from the box it names (px)."""
    return page.evaluate(
        """([ends, perLane]) => {
          const body = document.querySelector('.diagram-body'), origin = body.getBoundingClientRect();
          const find = (name) => {
            const [what, h] = name.split(':');
            if (h === undefined) return document.querySelector(ends[what]);
            if (perLane[what]) return document.querySelector(perLane[what].replace('{h}', h));
            return document.querySelector(`[data-stage="${what}"][data-head="${h}"]`);
          };
          const gap = (point, node) => {
            const r = node.getBoundingClientRect();
            const x = point.x + origin.left, y = point.y + origin.top;
            return Math.hypot(Math.max(r.left - x, 0, x - r.right), Math.max(r.top - y, 0, y - r.bottom));
          };
          return [...document.querySelectorAll('svg.wires path.wire')].map((p) => {
            const from = find(p.dataset.from), to = find(p.dataset.to);
            return { from: p.dataset.from, to: p.dataset.to,
              start: from ? gap(p.getPointAtLength(0), from) : null,
              end: to ? gap(p.getPointAtLength(p.getTotalLength()), to) : null };
          });
        }""",
        [WIRE_ENDS, PER_LANE],
    )


def geometry(target):
    """Every drawn wire's path against the boxes: its two ends, the direction its last stretch runs
    (x and y of the arrowhead's approach) and the stage labels it crosses."""
    return target.evaluate(
        """() => [...document.querySelectorAll('svg.wires path.wire')].map((p) => {
          const body = p.closest('.diagram-body').getBoundingClientRect(), L = p.getTotalLength();
          const at = (l) => { const q = p.getPointAtLength(l); return { x: q.x + body.left, y: q.y + body.top }; };
          const points = Array.from({ length: 41 }, (_, i) => at((L * i) / 40));
          const [before, end] = [at(Math.max(0, L - 4)), at(L)];
          const crossed = [...document.querySelectorAll('.stage-label')].filter((label) => {
            const r = label.getBoundingClientRect();
            const inside = (q) => q.x > r.left + 1 && q.x < r.right - 1 && q.y > r.top + 1 && q.y < r.bottom - 1;
            return r.width && points.some(inside);
          }).map((label) => label.textContent);
          return { from: p.dataset.from, to: p.dataset.to, dx: end.x - before.x, dy: end.y - before.y, crossed };
        })"""
    )


STATES = {
    "default": "",
    "reuse": "#reuse=1",
    "compare": "#compare=swapped_head_order",
    "yours": "#yours=" + '{"weights":[[[1,0,0],[0.5,0.5,0],[0.3,0.3,0.4]],[[1,0,0],[0.5,0.5,0],[0.3,0.3,0.4]]]}',
    "stage opened": "",
}
WIDTHS = {"1280x800": (1280, 800), "1024x768": (1024, 768), "768x1024": (768, 1024), "390x844": (390, 844)}


@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("size", WIDTHS)
def test_every_wire_leaves_its_source_ends_on_its_target_runs_with_the_data_and_crosses_no_label(
    page, live, size, state
):  # noqa: E501
    """At every width and in every state a wire goes from the box named by data-from to the one named
    by data-to, its arrowhead pointing right or down (the data's way through the block), and it runs
    through no stage's label; where the layout cannot draw one cleanly there is none."""
    width, height = WIDTHS[size]
    page.set_viewport_size({"width": width, "height": height})
    open_page(page, live, "/explorables/multi-head-attention" + STATES[state])
    if state == "stage opened":
        page.locator('[data-stage="head-output"][data-head="1"] .stage-open').first.click()
    page.evaluate("new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")
    for wire in wires(page):
        assert wire["start"] is not None and wire["start"] <= 12, wire
        assert wire["end"] is not None and wire["end"] <= 6, wire
    for wire in geometry(page):
        assert wire["dx"] >= -0.5 and wire["dy"] >= -0.5 and wire["dx"] + wire["dy"] > 1, wire  # right or down
        assert wire["crossed"] == [], wire


@pytest.mark.parametrize("state", ["default", "reuse", "stage opened"])
def test_the_lessons_embedded_workbench_is_wired_right_at_1280(page, live, state):
    """About 1,200 px wide inside the lesson, where a head's stages used to wrap and the wires ran back."""
    page.set_viewport_size({"width": 1280, "height": 800})
    open_page(page, live, "/lessons/multi-head-attention")
    frame = embedded_workbench(page)
    if state == "reuse":
        frame.get_by_label("Reuse head 1 features for both heads (broken)", exact=True).click()
    if state == "stage opened":
        frame.locator('[data-stage="head-output"][data-head="1"] .stage-open').first.click()
    inner = page.frame(name="workbench")
    inner.evaluate("new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")
    drawn = {(wire["from"], wire["to"]) for wire in wires(inner)}
    for h in ("0", "1"):  # A·V reaches each head's output, its stages wrapped onto two rows or not
        assert (f"weights:{h}", f"head-output:{h}") in drawn and (f"head-output:{h}", "concat") in drawn, drawn
    for wire in wires(inner):
        assert wire["start"] is not None and wire["start"] <= 12 and wire["end"] is not None and wire["end"] <= 6, wire
    for wire in geometry(inner):
        assert wire["dx"] >= -0.5 and wire["dy"] >= -0.5 and wire["dx"] + wire["dy"] > 1, wire
        assert wire["crossed"] == [], wire


def test_at_1280_the_block_is_one_wired_drawing_with_the_stream_and_both_heads_on_screen(page, live):
    page.set_viewport_size({"width": 1280, "height": 800})
    open_page(page, live, "/explorables/multi-head-attention")
    wait_until(page, "document.querySelectorAll('svg.wires path.wire').length > 0")  # drawn in the next frame
    drawn = wires(page)
    expected = {("x", "projections"), ("concat", "wo"), ("wo", "output"), ("output", "plus")}
    for h in (0, 1):
        expected |= {("projections", f"lane:{h}"), (f"qkv:{h}", f"scores:{h}"), (f"scores:{h}", f"weights:{h}")}
        expected |= {(f"weights:{h}", f"head-output:{h}"), (f"head-output:{h}", "concat")}
    assert {(w["from"], w["to"]) for w in drawn} == expected
    for w in drawn:  # each wire leaves the box it comes from and arrives at the one it feeds
        assert w["start"] is not None and w["start"] <= 12, w
        assert w["end"] is not None and w["end"] <= 6, w
    assert page.evaluate("window.scrollY") == 0
    for selector in (".stream", ".plus", ".stream-x", "#heatmap-0", "#heatmap-1"):
        box = page.locator(selector).bounding_box()
        assert box["y"] >= 0 and box["y"] + box["height"] <= 800, (selector, box)


def test_on_a_phone_the_block_reads_in_the_datas_order_down_the_page(page, live):
    page.set_viewport_size({"width": 390, "height": 844})
    open_page(page, live, "/explorables/multi-head-attention")
    page.evaluate("new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")  # wired, if ever
    assert wires(page) == []  # the arrows in the text join the stages; no wire crosses a phone's column

    def box(selector):
        return page.locator(selector).first.bounding_box()

    projections, lanes = box("[data-part=projections]"), [box(f".lane[data-head='{h}']") for h in (0, 1)]
    concat, wo, output = box('[data-stage="concat"]'), box('[data-stage="wo"]'), box('[data-stage="output"]')
    plus, residual = box(".plus"), box('[data-stage="residual"]')
    assert projections["y"] + projections["height"] <= min(lane["y"] for lane in lanes)
    assert max(lane["y"] + lane["height"] for lane in lanes) <= concat["y"]
    # concat, W_O, Y: one row left to right, or each below the one before
    for a, b in ((concat, wo), (wo, output)):
        assert b["y"] >= a["y"] + a["height"] or (abs(b["y"] - a["y"]) < 40 and b["x"] >= a["x"] + a["width"]), (a, b)
    assert output["y"] + output["height"] <= plus["y"] and plus["x"] < residual["x"]


@pytest.mark.parametrize("size", SIZES)
def test_a_change_mark_never_covers_a_digit(page, live, size):
    page.set_viewport_size(dict(zip(("width", "height"), SIZES[size], strict=True)))
    open_page(page, live, "/explorables/multi-head-attention")
    before = int(page.evaluate("performance.getEntriesByName('workbench-render').length"))
    page.get_by_label("Token 2 dimension 3", exact=True).fill("2.5")
    wait_until(page, f"performance.getEntriesByName('workbench-render').length > {before}")
    covered = page.evaluate(
        """() => [...document.querySelectorAll('.heatmap td.cell .mark')].map((mark) => {
          const cell = mark.closest('td'), text = cell.querySelector('.cell-pick').firstChild;
          const range = document.createRange(); range.selectNodeContents(text);
          const digits = range.getBoundingClientRect(), m = mark.getBoundingClientRect();
          const across = Math.min(digits.right, m.right) - Math.max(digits.left, m.left);
          const down = Math.min(digits.bottom, m.bottom) - Math.max(digits.top, m.top);
          return {value: text.textContent, overlap: across > 0.5 && down > 0.5};
        })"""
    )
    assert len(covered) >= 3  # head 2's changed weights are marked
    assert [c for c in covered if c["overlap"]] == []
    broken = page.evaluate(
        """() => [...document.querySelectorAll('.heatmap .cell-pick')].filter((pick) => {
          const range = document.createRange(); range.selectNodeContents(pick.firstChild);
          return range.getClientRects().length > 1; }).map((pick) => pick.textContent)"""
    )
    assert broken == []  # and no weight is broken over two lines to make room


@pytest.mark.parametrize("lang", ["en", "es", "zh-CN"])
@pytest.mark.parametrize("width", [1280, 390, 320])
def test_no_menu_of_the_workbench_clips_its_longest_choice(page, live, lang, width):
    page.set_viewport_size({"width": width, "height": 800})
    open_page(page, live, f"/explorables/multi-head-attention?lang={lang}")
    clipped = page.evaluate(
        """() => { const c = document.createElement('canvas').getContext('2d');
          return [...document.querySelectorAll('select')].flatMap((s) => { c.font = getComputedStyle(s).font;
            const wide = (text) => c.measureText(text).width;
            const longest = [...s.options].reduce((a, o) => (wide(o.text) > wide(a) ? o.text : a), '');
            // a select that shows its longest choice whole is at least that wide plus its arrow (about 20 px)
            return s.clientWidth - c.measureText(longest).width < 16 ? [[s.id, longest, s.clientWidth]] : []; }); }"""
    )
    assert clipped == []


@pytest.mark.parametrize("width", [320, 360, 375, 390, 412])
def test_on_every_phone_each_heads_weights_stay_inside_its_lane(page, live, width):
    page.set_viewport_size({"width": width, "height": 844})
    open_page(page, live, "/explorables/multi-head-attention")
    spill = page.evaluate(
        """() => [0, 1].map((h) => {
          const table = document.getElementById(`heatmap-${h}`).getBoundingClientRect();
          const lane = document.querySelector(`.lane[data-head="${h}"]`).getBoundingClientRect();
          return Math.max(lane.left - table.left, table.right - lane.right); })"""
    )
    assert max(spill) <= 0.5, spill
    assert overflow(page) == 0
