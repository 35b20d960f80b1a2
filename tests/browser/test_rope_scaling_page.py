"""The RoPE scaling explorable and its lesson, as a learner uses them: every score drawn is the API's, each
pair's dial says what the API's frequencies say of it, a released model's pairs are counted as the
calculator counts them, YaRN's two ramps show the issue's pair, a slip marks where it parts, the URL keeps
the view, and the lesson's three checkpoints complete in a browser at both sizes and in three languages."""

from __future__ import annotations

import math

import pytest
import requests
from playwright.sync_api import expect

from .conftest import complete_lesson, computed, open_page, values, wait_until
from .test_layout import SIZES, overflow

PATH = "/explorables/rope-scaling"
LESSON = "/lessons/rope-scaling"


def preset(live) -> dict:
    return requests.get(live.url + "/api/v1/presets/rope-scaling", timeout=30).json()["request"]


def body(live, offset: int, scaling: dict | None) -> dict:
    case = preset(live)
    rope = {
        "style": "half",
        "base": case["rope"]["base"],
        "offset": offset,
        **({"scaling": scaling} if scaling else {}),
    }
    return {"tokens": case["tokens"], "heads": 1, "causal": True, "rope": rope}


def lower(scores: list[list[float]]) -> list[float]:
    return [v for i, row in enumerate(scores) for j, v in enumerate(row) if j <= i]


def drawn_scores(page, stage: str) -> list[float]:
    cells = page.locator(f"[data-stage={stage}] td.cell:not(.masked)")
    return values(cells)


@pytest.mark.parametrize("size", SIZES)
def test_the_dials_the_scores_and_the_released_models_pairs_are_the_apis(page, live, size):
    page.set_viewport_size(dict(zip(("width", "height"), SIZES[size], strict=True)))
    open_page(page, live, f"{PATH}#offset=96&scaling=yarn")
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32}
    plain = computed(live, "/api/v1/attention", body(live, 96, None))
    scaled = computed(live, "/api/v1/attention", body(live, 96, yarn))
    assert drawn_scores(page, "scores-plain") == lower(plain["heads"][0]["scores"])
    assert drawn_scores(page, "scores-scaled") == lower(scaled["heads"][0]["scores"])
    # each pair's dial: seen in training when the pair finished a turn over 0..L-1, or the angle back to
    # position 0 (the last token's distance, 101) stays under the largest it met
    seen = page.locator(".rs-pair").evaluate_all("fs => fs.map(f => f.dataset.seen)")
    for pair, said in zip(plain["conventions"]["rope"]["frequencies"]["pairs"], seen, strict=True):
        reach = 31 * pair["inv_freq"]
        assert said == str(reach >= 2 * math.pi or 101 * pair["inv_freq"] <= reach).lower(), pair
    assert seen == ["true", "true", "false", "false"]  # base 100, d 8: the two slow pairs, past 31 positions
    status = page.locator("#status")
    expect(status).to_contain_text("multiplies every score by 1.2965")  # (0.1 ln 4 + 1)^2
    llama = computed(live, "/api/v1/rope/frequencies", {"preset": "llama-3.1-8b"})
    counted = {s: sum(p["status"] == s for p in llama["pairs"]) for s in ("kept", "blended", "divided")}
    legend = page.locator("[data-stage=wavelengths] li[data-status]")
    assert dict(legend.evaluate_all("ls => ls.map(l => [l.dataset.status, Number(l.dataset.count)])")) == counted
    expect(page.locator("[data-stage=ramp-pair]")).to_have_text(
        "Pair 30 keeps 0.6394 of its frequency in the code, 0.2952 in the paper."
    )
    assert overflow(page) == 0


def test_a_slip_chosen_switches_on_the_scaling_it_needs_and_marks_where_it_parts(page, live):
    open_page(page, live, f"{PATH}#offset=96")
    page.get_by_label("Break the scaling").select_option("wavelength_without_2pi")
    wait_until(page, "document.querySelector('#status').dataset.first === 'q'")
    assert page.get_by_label("Scaling", exact=True).input_value() == "llama3"
    expect(page.locator("#rs-note")).to_contain_text("needs Llama 3: switched on")
    llama3 = {
        "rope_type": "llama3",
        "factor": 4.0,
        "original_max_position_embeddings": 32,
        "low_freq_factor": 1,
        "high_freq_factor": 4,
    }
    compared = computed(
        live, "/api/v1/attention/compare", {**body(live, 96, llama3), "failure_mode": "wavelength_without_2pi"}
    )
    assert compared["divergence"]["first"] == "q"
    assert drawn_scores(page, "scores-broken") == lower(compared["broken"]["heads"][0]["scores"])
    # a scaling the slip does not slip on clears it, and says so
    page.get_by_label("Scaling", exact=True).select_option("linear")
    wait_until(page, "!location.hash.includes('compare=')")
    expect(page.locator("#rs-note")).to_contain_text("the comparison is cleared")
    wait_until(page, "!document.querySelector('[data-stage=scores-broken]')")


def test_without_a_length_following_scaling_moving_the_tokens_changes_no_score(page, live):
    open_page(page, live, f"{PATH}#scaling=llama3")
    near = drawn_scores(page, "scores-scaled")
    page.locator("#offset").focus()
    page.keyboard.press("End")  # the range's end: the last token at position 255
    expect(page.locator("#position")).to_contain_text("positions 250 to 255")  # drawn at the new place
    expect(page.locator("#status")).to_contain_text("does not follow the length")
    assert drawn_scores(page, "scores-scaled") == pytest.approx(near, abs=1e-9)
    page.get_by_label("Scaling", exact=True).select_option("dynamic")
    expect(page.locator("#status")).to_contain_text("Dynamic NTK follows the length")
    assert drawn_scores(page, "scores-scaled") != pytest.approx(near, abs=1e-3)  # its base grew with the length
    again = page.context.new_page()
    again.goto(page.url)  # the link keeps the view
    again.wait_for_selector("main[aria-busy=false]")
    assert again.get_by_label("Scaling", exact=True).input_value() == "dynamic"
    assert again.locator("#offset").input_value() == "250"
    again.close()


def test_the_workbench_links_its_rope_control_to_the_explorable(page, live):
    open_page(page, live, "/explorables/multi-head-attention")
    link = page.locator("#rope-scaling-link")
    assert link.get_attribute("href") == PATH
    assert requests.get(live.url + PATH, timeout=30).status_code == 200


EXPLANATIONS = {
    "en": "A slow pair never finished a turn in training, so past the training length its angle is new; YaRN keeps "
    "the fast pairs, divides the slow ones and multiplies cos and sin by an attention factor. Ignoring the scaling "
    "turns the slow pairs to angles never seen.",
    "es": "Un par lento nunca completó una vuelta en el entrenamiento, así que más allá de la longitud de "
    "entrenamiento su ángulo es nuevo; YaRN conserva los pares rápidos, divide los lentos y usa un factor de "
    "atención. Ignorar el escalado lleva los pares lentos a ángulos nunca vistos.",
    "zh-CN": "慢的特征对在训练中一圈都没转完，所以超过训练长度后它的角度是新的；YaRN 保留快的特征对，把慢的除以因子，"
    "再乘上注意力因子。忽略缩放会让慢特征对转到从未见过的角度。",
}


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("locale", ["en", "es", "zh-CN"])
def test_a_new_learner_completes_the_rope_scaling_lesson(page, live, locale, size):
    def manipulate(frame):
        frame.locator("#offset").focus()
        frame.locator("#offset").press("End")  # past the training length
        frame.locator("#scaling").select_option("yarn")  # a scaling
        frame.locator("#ramp").select_option("paper")  # the paper's ramp
        frame.locator("#compare").select_option("rope_scaling_ignored")  # break it

    said = ("Kept 0-28, blended 29-34, divided 35-63.", EXPLANATIONS[locale])
    complete_lesson(page, live, LESSON, locale, SIZES[size], said, manipulate)
    assert overflow(page) == 0
