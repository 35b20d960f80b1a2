"""The inside-the-model explorable and its lesson, as a learner uses them: every lens cell drawn is the API's
reading of that stream and position, every patching cell the API's effect or estimate, the flags are the
API's, a pitfall marks where it first parts, the URL keeps the view, the trained-heads page links here, and
the lesson's three checkpoints complete in a browser at both sizes and in three languages."""

from __future__ import annotations

import pytest
import requests
from playwright.sync_api import expect

from .conftest import complete_lesson, computed, open_page, values, wait_until
from .test_layout import SIZES, overflow

PATH = "/explorables/inside-the-model"
LESSON = "/lessons/inside-the-model"
MODEL = "/api/v1/models/bytes-2l-attn"
CLEAN, CORRUPTED = "q8Lm3Zk7q8Lm3", "q8Lm3Yk7q8Lm3"
METRIC = {"kind": "logit_difference", "bytes": [ord("Z"), ord("Y")]}


def patch(live, component: str, **extra) -> dict:
    body = {"clean": CLEAN, "corrupted": CORRUPTED, "metric": METRIC, "component": component, "estimate": True}
    return computed(live, MODEL + "/patch", {**body, **extra})


def flat(grid) -> list[float]:
    return [v for row in grid for v in (flat(row) if isinstance(row[0], list) else row)]


@pytest.mark.parametrize("size", SIZES)
def test_the_lens_and_both_patching_grids_are_the_apis(page, live, size):
    page.set_viewport_size(dict(zip(("width", "height"), SIZES[size], strict=True)))
    open_page(page, live, PATH)
    lens = computed(live, MODEL + "/lens", {"text": CLEAN, "top": 3})
    cells = page.locator("[data-stage=lens] td.in-lens-cell")
    drawn = cells.evaluate_all("cs => cs.map(c => [+c.dataset.layer, +c.dataset.position, +c.dataset.top])")
    expected = [[s["layer"], p["position"], p["top"][0]["byte"]] for s in lens["layers"] for p in s["positions"]]
    assert drawn == expected
    # the model's own prediction at the end, after the second copy of q8Lm3: the copied byte
    assert drawn[-1][2] == ord("Z")
    heads = patch(live, "head_output")
    assert values(page.locator("[data-stage=effect] td.cell")) == flat(heads["effect"])
    assert values(page.locator("[data-stage=estimate] td.cell")) == flat(heads["estimate"])
    flagged = page.locator("[data-stage=estimate] td.flagged").evaluate_all("cs => cs.map(c => c.dataset.cell)")
    assert flagged == [".".join(map(str, f["cell"])) for f in heads["flagged"]]
    # the largest effect named is layer 2 head 2 at the last position, as the API's grid has it
    expect(page.locator("#patch-status")).to_have_attribute("data-largest", "1.1.12")
    page.get_by_label("Patch", exact=True).select_option("residual")
    residual = patch(live, "residual")
    wait_until(page, "document.querySelectorAll('[data-stage=effect] tbody tr').length === 3")
    assert values(page.locator("[data-stage=effect] td.cell")) == flat(residual["effect"])
    assert overflow(page) == 0


def test_a_chosen_cell_sets_its_effect_beside_its_estimate_and_says_why_it_is_flagged(page, live):
    open_page(page, live, PATH + "#clean=q8Lm3Zk7q8Lm3&corrupted=q8Lm3Yk7q8Lm3&component=residual")
    residual = patch(live, "residual")
    (flag, *_) = residual["flagged"]
    key = ".".join(map(str, flag["cell"]))
    page.locator(f"[data-stage=estimate] td[data-cell='{key}'] button").click()
    cell = page.locator("#cell")
    layer, position = flag["cell"]
    effect = residual["effect"][layer][position]
    expect(cell).to_contain_text(f"an effect of {effect:.3f}")
    expect(cell).to_contain_text(f"The estimate is {residual['estimate'][layer][position]:.3f}")
    expect(cell).to_contain_text("the softmax saturates")
    assert f"cell={key}" in page.url
    again = page.context.new_page()
    again.goto(page.url)  # the link keeps the view, the chosen cell included
    again.wait_for_selector("main[aria-busy=false]")
    expect(again.locator("#cell")).to_contain_text(f"an effect of {effect:.3f}")
    assert again.get_by_label("Patch", exact=True).input_value() == "residual"
    again.close()


@pytest.mark.parametrize(
    "pitfall", ["patch_position_shifted", "gradient_through_frozen_softmax", "lens_cached_norm_scale"]
)
def test_a_pitfall_is_drawn_beside_the_right_computation_where_it_first_parts(page, live, pitfall):
    open_page(page, live, PATH)
    page.get_by_label("Pitfall", exact=True).select_option(pitfall)
    if pitfall.startswith("lens"):
        lens = computed(live, MODEL + "/lens", {"text": CLEAN, "top": 3, "failure_mode": pitfall})
        first = lens["first_difference"]
        wait_until(page, "document.querySelector('#lens-status').dataset.first !== undefined")
        assert page.locator("#lens-status").get_attribute("data-first") == f"{first['layer']}.{first['position']}"
        marked = page.locator("[data-stage=lens] td.in-first")
        assert marked.evaluate("c => [+c.dataset.layer, +c.dataset.position]") == [first["layer"], first["position"]]
        return
    broken = patch(live, "head_output", failure_mode=pitfall)
    first = ".".join(map(str, broken["first_difference"]["cell"]))
    wait_until(page, "document.querySelector('[data-stage=broken]') !== null")
    expect(page.locator("#patch-status")).to_have_attribute("data-first", first)
    shown = broken["estimate"] if broken["first_difference"]["what"] == "estimate" else broken["effect"]
    assert values(page.locator("[data-stage=broken] td.cell")) == flat(shown)
    assert values(page.locator("[data-stage=effect] td.cell")) == flat(broken["correct"]["effect"])
    assert page.locator(f"[data-stage=broken] td[data-cell='{first}']").get_attribute("class").count("in-first") == 1


def test_texts_of_different_lengths_are_refused_with_a_reason_and_the_lens_still_reads(page, live):
    open_page(page, live, PATH)
    page.get_by_label("Corrupted text", exact=True).fill("q8Lm3Yk7q8Lm")
    page.get_by_role("button", name="Compute").click()
    expect(page.locator("#in-note")).to_contain_text("must be as long in bytes")
    assert page.locator("[data-stage=effect]").count() == 0
    assert page.locator("[data-stage=lens] td.in-lens-cell").count() == 3 * len(CLEAN)


def test_the_trained_heads_page_links_here(page, live):
    open_page(page, live, "/explorables/trained-heads")
    assert page.locator("#inside-link").get_attribute("href") == PATH
    assert requests.get(live.url + PATH, timeout=30).status_code == 200


EXPLANATIONS = {
    "en": "The lens reads each layer's stream through the final norm recomputed on that stream. A patch copies a "
    "clean activation into the corrupted run: a large effect shows it carries the difference, here layer 2's "
    "induction head. The gradient estimate misses where the softmax saturates.",
    "es": "La lente lee el flujo de cada capa con la norma final recalculada en ese flujo. Un parche copia una "
    "activación limpia en la ejecución corrupta: un efecto grande muestra que lleva la diferencia, aquí la "
    "cabeza de inducción de la capa 2. La estimación por gradiente falla donde el softmax se satura.",
    "zh-CN": "透镜用在该残差流上重新计算的最终归一化读每一层的流。修补把干净的激活复制到损坏的运行中：效应大说明它"
    "携带了差别，这里是第 2 层的归纳头。梯度估计在 softmax 饱和处会失手。",
}


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("locale", ["en", "es", "zh-CN"])
def test_a_new_learner_completes_the_inside_the_model_lesson(page, live, locale, size):
    def manipulate(frame):
        frame.locator("#corrupted").fill("q8Lm3Xk7q8Lm3")  # corrupt another way
        frame.locator("#texts button[type=submit]").click()
        frame.locator("[data-stage=effect] td[data-cell='1.1.12'] button").click()  # a cell
        frame.locator("#read").select_option("1.1")  # a head's own write
        frame.locator("#pitfall").select_option("gradient_through_frozen_softmax")  # a pitfall

    said = ("Layer 2's induction heads at the last position.", EXPLANATIONS[locale])
    complete_lesson(page, live, LESSON, locale, SIZES[size], said, manipulate)
    assert overflow(page) == 0
