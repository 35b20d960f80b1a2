"""The speculative decoding explorable and its lesson, as a learner uses them: the rule's table is the API's on
the p and q drawn (and the emitted column is p), moving a slider recomputes it, a slip's emitted column
parts from p, the model's rounds are the API's with each draft's state, the verification block's mask is
causal inside the block with the rolled-back rows struck, the URL keeps the view, and the lesson's three
checkpoints complete in a browser at both sizes and in three languages."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from .conftest import complete_lesson, computed, open_page, values, wait_until
from .test_layout import SIZES, overflow

PATH = "/explorables/speculative-decoding"
LESSON = "/lessons/speculative-decoding"
P, Q = [0.45, 0.25, 0.15, 0.1, 0.05], [0.2, 0.4, 0.1, 0.2, 0.1]


def normalised(v: list[float]) -> list[float]:
    """What the page posts: its sliders' weights divided by their sum (summed left to right, as it sums)."""
    return [x / sum(v) for x in v]


def column(page, stage: str) -> list[float]:
    return values(page.locator(f"td[data-stage={stage}]"))


@pytest.mark.parametrize("size", SIZES)
def test_the_rule_and_the_models_rounds_are_the_apis(page, live, size):
    page.set_viewport_size(dict(zip(("width", "height"), SIZES[size], strict=True)))
    open_page(page, live, PATH)
    rule = computed(
        live, "/api/v1/speculative/acceptance", {"p": normalised(P), "q": normalised(Q), "temperature": 1, "gamma": 4}
    )
    for stage in ("p", "q", "acceptance", "accepted", "emitted"):
        assert column(page, stage) == rule[stage], stage
    assert column(page, "emitted") == pytest.approx(P, abs=1e-15)  # what comes out is p
    body = {"prompt": "The ", "gamma": 4, "max_new_tokens": 24, "temperature": 1, "seed": 1, "draft": "lens"}
    decoded = computed(live, "/api/v1/models/bytes-2l-attn/speculate", body)
    wait_until(page, "document.querySelectorAll('.sd-round').length > 0")
    drawn = page.locator(".sd-round").evaluate_all(
        "rs => rs.map(r => [...r.querySelectorAll('.sd-byte')].map(b => [+b.dataset.byte, b.dataset.state]))"
    )
    state = lambda d: "unverified" if "accepted" not in d else ("kept" if d["accepted"] else "rejected")  # noqa: E731
    expected = [
        [[d["byte"], state(d)] for d in r["drafts"]] + [[r["ending"]["byte"], r["ending"]["kind"]]]
        for r in decoded["rounds"]
    ]
    assert drawn == expected
    # round 1's block: every query sees the cache and the block's rows up to itself, and no later one
    seen = page.locator("[data-stage=block] tbody tr").evaluate_all(
        "rows => rows.map(r => [...r.querySelectorAll('td[data-seen]')].map(c => c.dataset.seen === 'true'))"
    )
    assert seen == [[j <= i for j in range(len(seen))] for i in range(len(seen))]
    assert overflow(page) == 0


def test_moving_a_slider_recomputes_the_rule_and_the_link_keeps_it(page, live):
    open_page(page, live, PATH)
    slider = page.get_by_label("q of a", exact=True)
    slider.focus()
    slider.press("End")  # q of a to 1
    wait_until(page, "location.hash.includes('q=1,')")
    q = [1, *Q[1:]]
    rule = computed(live, "/api/v1/speculative/acceptance", {"p": normalised(P), "q": normalised(q)})
    wait_until(page, f"Math.abs(+document.querySelector('#rule-status').dataset.alpha - {rule['alpha']}) < 1e-12")
    assert column(page, "q") == rule["q"]
    again = page.context.new_page()
    again.goto(page.url)
    again.wait_for_selector("main[aria-busy=false]")
    assert values(again.locator("td[data-stage=q]")) == rule["q"]
    again.close()


def test_a_slip_parts_from_p_and_the_cache_slip_is_found_in_the_models_rounds(page, live):
    open_page(page, live, PATH)
    page.get_by_label("Break it", exact=True).select_option("residual_from_target")
    body = {
        "p": normalised(P),
        "q": normalised(Q),
        "temperature": 1,
        "gamma": 4,
        "failure_mode": "residual_from_target",
    }
    rule = computed(live, "/api/v1/speculative/acceptance", body)
    wait_until(page, "document.querySelector('td[data-stage=broken]') !== null")
    assert column(page, "broken") == rule["broken"]["emitted"]
    expect(page.locator("#rule-status")).to_have_attribute("data-tv", str(rule["broken"]["total_variation"]))
    page.get_by_label("Break it", exact=True).select_option("cache_not_rolled_back")
    expect(page.locator("#rule-status")).to_contain_text("needs the model's cache")
    wait_until(page, "document.querySelector('#model-status').dataset.first !== ''")
    expect(page.locator("#model-status")).to_contain_text("Cache not rolled back")


EXPLANATIONS = {
    "en": "A draft from q is accepted with min(1, p/q), so kept drafts give min(p, q); a rejection draws from the "
    "residual, which adds the rest of p, so the output distribution is exact. The cache is rolled back, else later "
    "tokens attend to rejected drafts.",
    "es": "Un borrador de q se acepta con min(1, p/q), así que los aceptados dan min(p, q); un rechazo saca del "
    "residuo, que añade el resto de p, y la distribución es exacta. La caché se revierte, o los tokens siguientes "
    "atenderían a borradores rechazados.",
    "zh-CN": "从 q 中抽出的草稿以 min(1, p/q) 被接受，所以被接受的草稿给出 min(p, q)；"
    "被拒绝时从残差中抽取，补上 p 的其余部分，所以输出的分布是精确的。缓存要回滚，否则之后的词元会注意到被拒绝的草稿。",
}


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("locale", ["en", "es", "zh-CN"])
def test_a_new_learner_completes_the_speculative_decoding_lesson(page, live, locale, size):
    def manipulate(frame):
        frame.locator("#q-0").focus()
        frame.locator("#q-0").press("ArrowRight")  # move q
        frame.locator("#gamma").select_option("8")  # change gamma
        frame.locator("#draft").select_option("bigram")
        frame.locator("#run button[type=submit]").click()  # decode with the model
        frame.locator("#compare").select_option("shared_uniform")  # break the rule

    said = ("0.6: min(0.5,0.2)+min(0.3,0.2)+min(0.2,0.6); never the third token.", EXPLANATIONS[locale])
    complete_lesson(page, live, LESSON, locale, SIZES[size], said, manipulate)
    assert overflow(page) == 0
