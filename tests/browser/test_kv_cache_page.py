"""The KV cache explorable and its lesson, as a learner uses them: every number drawn is the API's
(the cache row by row, the new query's weights, the kv head each query head reads, the equality with
the full pass, a released model's bytes), the URL keeps the view, and the case-study lesson's three
checkpoints complete in a browser at both sizes and in all three languages."""

from __future__ import annotations

import pytest
import requests
from playwright.sync_api import expect

from .conftest import (
    complete_lesson,
    completed,
    computed,
    embedded_workbench,
    open_page,
    predict_in_lesson,
    values,
    wait_for_checkpoint,
    wait_until,
)
from .test_layout import SIZES, overflow

PATH = "/explorables/kv-cache"
LESSON = "/lessons/kv-cache-and-latent-attention"
KV_HEADS = {"mha": 4, "gqa": 2, "mqa": 1}


def decode_body(live, kind, rope=True, failure_mode=None):
    preset = requests.get(live.url + "/api/v1/presets/kv-cache").json()["request"]
    body = {"tokens": preset["tokens"], "heads": preset["heads"], "causal": True}
    if rope:
        body["rope"] = preset["rope"]
    if kind == "mla":
        latent = dict(preset["latent"], absorbed=False)
        if not rope:
            latent.pop("rope_key"), latent.pop("rope_query")
        body["latent"] = latent
    elif KV_HEADS[kind] != preset["heads"]:
        body["kv_heads"] = KV_HEADS[kind]
    if failure_mode:
        body["failure_mode"] = failure_mode
    return computed(live, "/api/v1/attention/decode", body)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("kind", ["mha", "gqa", "mqa", "mla"])
def test_the_drawn_cache_weights_and_mapping_are_the_apis_numbers(page, live, kind, size):
    page.set_viewport_size(dict(zip(("width", "height"), SIZES[size], strict=True)))
    open_page(page, live, f"{PATH}#kind={kind}&position=4")
    step = decode_body(live, kind)["steps"][3]
    rows = page.locator("[data-stage=cache] tbody tr")
    tables = page.locator("table[data-stage=cache]")
    if kind == "mla":
        assert tables.count() == 1
        expected = [a + b for a, b in zip(step["cache"]["latent"], step["cache"]["rope_key"], strict=True)]
        assert [values(row.locator("td")) for row in rows.all()] == expected
    else:
        assert tables.count() == KV_HEADS[kind]
        for g in range(KV_HEADS[kind]):
            drawn = [
                values(r.locator("td"))
                for r in page.locator(f"table[data-stage=cache][data-head='{g}'] tbody tr").all()
            ]
            keys, vals = step["cache"]["key"][g], step["cache"]["value"][g]
            assert drawn == [k + v for k, v in zip(keys, vals, strict=True)]
    assert rows.nth(0).get_attribute("data-row") == "0" and rows.count() == 4 * max(
        1, tables.count() if kind != "mla" else 1
    )
    for head in step["heads"]:
        drawn = values(page.locator(f"[data-stage=weights][data-head='{head['index']}'] td[data-variant=main]"))
        assert drawn == head["weights"] and len(drawn) == 4
        line = page.locator(f"[data-stage=mapping] line[data-query-head='{head['index']}']")
        assert line.get_attribute("data-kv-head") == str(0 if kind == "mla" else head["kv_head"])
    equality = page.locator("[data-stage=equality]")
    assert equality.get_attribute("data-value") == "0" and "max difference 0." in equality.inner_text()
    assert overflow(page) == 0


def test_a_failure_mode_draws_the_broken_row_beside_the_right_one(page, live):
    open_page(page, live, f"{PATH}#position=3&compare=decode_mask_top_left")
    wait_until(page, "document.querySelector('[data-stage=equality]').classList.contains('differs')")
    broken = decode_body(live, "mha", failure_mode="decode_mask_top_left")["steps"][2]
    right = decode_body(live, "mha")["steps"][2]
    for h in range(4):
        weights = page.locator(f"[data-stage=weights][data-head='{h}']")
        assert values(weights.locator("td[data-variant=broken]")) == broken["heads"][h]["weights"] == [1.0, 0.0, 0.0]
        assert values(weights.locator("td[data-variant=correct]")) == right["heads"][h]["weights"]
    assert float(page.locator("[data-stage=equality]").get_attribute("data-value")) > 0.01


def test_a_tiling_link_opens_grouped_query_attention_and_draws_the_tiled_lines(page, live):
    open_page(page, live, f"{PATH}#compare=gqa_tiled")
    assert page.get_by_label("Keys and values", exact=True).input_value() == "gqa"
    lines = page.locator("[data-stage=mapping] line")
    assert [lines.nth(h).get_attribute("data-kv-head") for h in range(4)] == ["0", "1", "0", "1"]  # h mod 2


def test_a_released_models_cache_is_drawn_in_bytes_with_its_source(page, live):
    open_page(page, live, PATH)
    memory = page.locator("[data-stage=memory]")
    assert int(memory.get_attribute("data-value")) == 34_560 * 2 * 163_840  # DeepSeek-V2 at its whole context
    assert (
        "34,560" in page.locator(".kv-figures").inner_text() and "2405.04434" in page.locator(".kv-memory").inner_text()
    )
    page.get_by_label("Model", exact=True).select_option("llama-3-8b")
    page.get_by_label("Context (tokens)").fill("4096")  # typed while the model's redraw may still land
    page.get_by_label("Context (tokens)").dispatch_event("change")
    wait_until(page, "document.querySelector('[data-stage=memory]').dataset.value === String(1024 ** 3 / 2)")
    assert page.get_by_label("Context (tokens)").input_value() == "4096"  # the redraw did not splice into it
    page.get_by_label("Context (tokens)").fill("8192")
    page.get_by_label("Context (tokens)").dispatch_event("change")
    wait_until(page, "document.querySelector('[data-stage=memory]').dataset.value === String(1024 ** 3)")
    assert "1.0 GiB" in page.locator(".kv-bars").text_content()
    assert "context=8192" in page.url and "model=llama-3-8b" in page.url


def test_stepping_with_the_keyboard_grows_the_cache_and_the_link_keeps_the_view(page, live):
    open_page(page, live, f"{PATH}#kind=mqa")
    assert page.locator("table[data-stage=cache] tbody tr").count() == 1
    page.get_by_role("button", name="Decode the next position").focus()
    for _ in range(2):
        page.keyboard.press("Enter")
    wait_until(page, "document.querySelectorAll('table[data-stage=cache] tbody tr').length === 3")
    assert page.locator("tr.newest").get_attribute("data-row") == "2"
    again = page.context.new_page()
    again.goto(page.url)
    again.wait_for_selector("main[aria-busy=false]")
    assert again.locator("table[data-stage=cache] tbody tr").count() == 3
    again.close()


KINDS = {
    "en": "MLA: a latent per token (DeepSeek-V2)",
    "es": "MLA: un latente por token (DeepSeek-V2)",
    "zh-CN": "MLA：每个词元一个潜在向量（DeepSeek-V2）",
}


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("locale", ["en", "es", "zh-CN"])
def test_a_new_learner_completes_the_case_study(page, live, locale, size):
    said = "128 KiB a token, 1 GiB for 8,192 tokens, 4 GiB as MHA."
    frame, explanation, record_explanation = predict_in_lesson(page, live, LESSON, locale, SIZES[size], said)
    frame.locator("#step").click()  # step the decode
    frame.locator("#kind").select_option(label=KINDS[locale])  # switch to MLA
    frame.locator("#model").select_option("llama-3-8b")  # a released model
    frame.locator("#compare").select_option("cache_not_appended")  # break it
    wait_for_checkpoint(page, "experiment")
    assert frame.locator("[data-manipulation][data-done=true]").count() == 4
    # explain earns its completion: "x" is refused with a hint, and no model answer shows yet
    page.get_by_label(explanation).fill("x")
    page.get_by_role("button", name=record_explanation).click()
    assert page.locator("#explanation-hint").is_visible() and "12" in page.locator("#explanation-hint").inner_text()
    assert page.locator("[data-answers=explain]").is_hidden() and "explain" not in completed(page)
    page.get_by_label(explanation).fill("The cache holds the same keys and values; MLA keeps the latent and k_R.")
    page.get_by_role("button", name=record_explanation).click()
    wait_for_checkpoint(page, "explain")
    assert completed(page) == {"predict", "experiment", "explain"}
    assert page.locator("#explanation-hint").is_hidden() and page.locator("[data-answers=explain]").is_visible()
    assert overflow(page) == 0


def output_gap(live, mode, position):
    """Independently of the page: the broken decode's output row against the right one's, at a position."""
    broken, right = decode_body(live, "mha", failure_mode=mode), decode_body(live, "mha")
    rows = broken["steps"][position - 1]["output"], right["steps"][position - 1]["output"]
    return max(abs(a - b) for a, b in zip(*rows, strict=True))


def test_the_headline_says_what_holds_at_the_current_position(page, live):
    """A broken decode is often identical at first: the headline speaks of this position, then of the run."""
    first = next(p for p in range(1, 7) if output_gap(live, "decode_position_reset", p) > 1e-12)
    assert first > 1  # the position reset changes nothing at position 1 (its position is 0 either way)
    open_page(page, live, PATH + "#compare=decode_position_reset&position=1")
    equality = page.locator("#equality")
    expect(equality).to_contain_text("identical to recomputing the full pass at position 1")
    assert f"differs from position {first} on" in equality.inner_text()
    open_page(page, live, PATH + f"#compare=decode_position_reset&position={first}")
    expect(equality).to_contain_text(f"at position {first} the decode differs")
    assert float(equality.get_attribute("data-here")) == pytest.approx(output_gap(live, "decode_position_reset", first))


def test_a_failure_mode_that_needs_another_kind_says_so_as_it_switches(page, live):
    open_page(page, live, PATH)
    page.get_by_label("Break the decode").select_option("gqa_tiled")
    note = page.locator("#kv-note")
    expect(note).to_contain_text("so it needs GQA: switched to GQA")
    assert page.get_by_label("Keys and values", exact=True).input_value() == "gqa"


def test_absorbed_mla_says_what_changes_and_that_the_numbers_are_equal(page, live):
    open_page(page, live, PATH + "#kind=mla")
    note = page.locator("#absorbed-note")
    expect(note).to_contain_text("rebuilt from the cached latent")
    page.get_by_label("Absorbed (W_UK folded into the query)").check()
    expect(note).to_contain_text("K and V are never formed")
    assert 0 <= float(note.get_attribute("data-value")) < 1e-12  # equal but for float64 rounding


@pytest.mark.parametrize("typed", ["0", "200000000", "", "2.5"])
def test_an_invalid_context_is_refused_with_a_visible_message(page, live, typed):
    open_page(page, live, PATH)
    before = page.locator("#memory").inner_text()
    field = page.get_by_label("Context (tokens)")
    field.fill(typed)
    field.dispatch_event("change")
    error = page.locator("#context-error")
    expect(error).to_be_visible()
    assert "whole number of tokens from 1 to 100,000,000" in error.inner_text()
    assert field.get_attribute("aria-invalid") == "true" and page.locator("#memory").inner_text() == before


def test_each_manipulation_is_announced_and_the_hash_keeps_only_this_pages_keys(page, live):
    open_page(page, live, PATH + "#kind=mqa&reuse=0&t=1,2")
    assert page.evaluate("location.hash") == "#kind=mqa"  # the other workbench's keys do not ride along
    page.locator("#step").click()
    expect(page.locator("[data-announce=checkpoint]")).to_contain_text("Manipulation 1 of 4 done")
    page.get_by_label("Keys and values", exact=True).select_option("gqa")
    expect(page.locator("[data-announce=checkpoint]")).to_contain_text("Manipulation 2 of 4 done")


SINK_LOGITS = [1, 0, -1, 2]  # the page's, one per query head (written here, not read from the page)


def long_body(live, failure_mode=None, **long):
    preset = requests.get(live.url + "/api/v1/presets/kv-cache").json()["request"]
    body = {"tokens": preset["tokens"], "heads": preset["heads"], "causal": True, "rope": preset["rope"], **long}
    return computed(
        live, "/api/v1/attention/decode", {**body, **({"failure_mode": failure_mode} if failure_mode else {})}
    )


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("locale", ["en", "es", "zh-CN"])
def test_a_rolling_renumbered_cache_is_drawn_slot_by_slot_with_its_rope_positions(page, live, size, locale):
    page.set_viewport_size(dict(zip(("width", "height"), SIZES[size], strict=True)))
    open_page(page, live, f"{PATH}?lang={locale}#window=3&sinks=1&logit=1&renumber=1&position=6")
    assert page.evaluate("document.documentElement.lang") == locale
    step = long_body(live, window=3, sinks=1, sink_logit=SINK_LOGITS, positions="cache")["steps"][5]
    for g in range(4):
        rows = page.locator(f"table[data-stage=cache][data-head='{g}'] tbody tr")
        assert [int(r.get_attribute("data-row")) for r in rows.all()] == step["cache_positions"]  # slot order
        drawn = [values(r.locator("td:not([data-stage=rope-at])")) for r in rows.all()]
        assert drawn == [k + v for k, v in zip(step["cache"]["key"][g], step["cache"]["value"][g], strict=True)]
        turned = [int(c) for c in rows.locator("td[data-stage=rope-at]").all_inner_texts()]
        assert turned == step["rope_positions"]["keys"]
    assert page.locator("[data-stage=rope-positions]").get_attribute("data-query") == str(
        step["rope_positions"]["query"]
    )
    for head in step["heads"]:
        total = page.locator(f"[data-stage=weights][data-head='{head['index']}'] [data-stage=row-sum]")
        assert float(total.get_attribute("data-value")) == pytest.approx(sum(head["weights"]), abs=1e-12)
        assert sum(head["weights"]) < 1  # the sink logit took a share
    original = long_body(live, window=3, sinks=1, sink_logit=SINK_LOGITS)["steps"][5]
    gap = max(abs(a - b) for a, b in zip(step["output"], original["output"], strict=True))
    assert float(page.locator("#equality").get_attribute("data-here")) == pytest.approx(gap)
    assert overflow(page) == 0


@pytest.mark.parametrize(
    ("mode", "hash_after"),
    [
        ("sinks_evicted", {"window": "3", "sinks": "1"}),
        ("sink_logit_ignored", {"window": None, "logit": "1"}),
        ("positions_from_text", {"window": "3", "renumber": "1"}),
    ],
)
def test_a_long_context_slip_switches_on_what_it_needs_and_shows_where_it_parts(page, live, mode, hash_after):
    open_page(page, live, PATH + "#position=6")
    page.get_by_label("Break the decode").select_option(mode)
    expect(page.locator("#kv-note")).to_contain_text("switched on")
    wait_until(page, "document.querySelector('[data-stage=equality]').classList.contains('differs')")
    state = dict(part.split("=") for part in page.evaluate("location.hash").lstrip("#").split("&"))
    assert {k: state.get(k) for k in hash_after} == hash_after
    side_by_side(page, live, mode, state)


def side_by_side(frame, live, mode, state):
    """The broken decode's weights beside the right one's at the state's position, each as the API computes it
    for the long-context fields the page's hash holds."""
    long = {
        **({"window": int(state["window"])} if "window" in state else {}),
        "sinks": int(state.get("sinks", 0)),
        **({"sink_logit": SINK_LOGITS} if "logit" in state else {}),
        **({"positions": "cache"} if "renumber" in state else {}),
    }
    at = int(state.get("position", 1)) - 1
    broken, right = long_body(live, mode, **long)["steps"][at], long_body(live, **long)["steps"][at]
    for h in range(4):
        weights = frame.locator(f"[data-stage=weights][data-head='{h}']")
        assert values(weights.locator("td[data-variant=broken]")) == broken["heads"][h]["weights"]
        assert values(weights.locator("td[data-variant=correct]")) == right["heads"][h]["weights"]


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("locale", ["en", "es"])
def test_the_long_context_lesson_walks_every_slip_to_its_end(page, live, size, locale):
    """Issue 65: in the lesson, each of its slips opened from its link and stepped to the last position: no
    page error, the broken and the right weights side by side as the API computes them, the watched table
    whole in view; the last slip's state is back after a reload."""
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.set_viewport_size(dict(zip(("width", "height"), SIZES[size], strict=True)))
    open_page(page, live, f"{LONG_LESSON}?lang={locale}")
    frame = embedded_workbench(page)
    inside = page.locator("#workbench-frame").element_handle().content_frame()  # its hash, read
    slips = page.locator("a[data-failure-mode]").evaluate_all("links => links.map((a) => a.dataset.failureMode)")
    assert len(slips) >= 6
    for mode in slips:
        page.locator(f"a[data-failure-mode={mode}]").first.click()
        expect(frame.locator("#compare")).to_have_value(mode)
        position = "+(new URLSearchParams(location.hash.slice(1)).get('position') || 1)"
        while (at := inside.evaluate(position)) < 6:
            frame.locator("#step").click()
            wait_until(inside, f"{position} === {at + 1}")
        frame.locator("main[aria-busy=false]").wait_for()
        page.wait_for_timeout(200)
        state = dict(part.split("=") for part in inside.evaluate("location.hash").lstrip("#").split("&"))
        side_by_side(frame, live, mode, state)
        region = frame.locator(".kv-query-panel .scroll-region")
        assert region.evaluate("r => r.scrollWidth <= r.clientWidth && r.getBoundingClientRect().right <= innerWidth")
    page.reload()
    frame = embedded_workbench(page)
    expect(frame.locator("#compare")).to_have_value(slips[-1])
    inside = page.locator("#workbench-frame").element_handle().content_frame()
    assert inside.evaluate("new URLSearchParams(location.hash.slice(1)).get('position')") == "6"
    assert errors == []


def test_a_cache_that_keeps_everything_says_its_size_beside_the_right_one(page, live):
    open_page(page, live, PATH + "#position=6&window=2")
    page.get_by_label("Break the decode").select_option("cache_not_truncated")
    equality = page.locator("#equality")
    expect(equality).to_contain_text("the same numbers as the decode done right")
    kept = long_body(live, "cache_not_truncated", window=2)["steps"][5]["cache_elements"]
    right = long_body(live, window=2)["steps"][5]["cache_elements"]
    assert (kept, right) == (6 * 16, 2 * 16)  # six positions against a window's two, 16 numbers a position
    assert f"holding {kept} numbers where {right} would do" in equality.inner_text()
    assert page.locator("table[data-stage=cache][data-head='0'] tbody tr").count() == 6


def test_a_local_global_model_shows_its_cache_by_kind_of_layer(page, live):
    open_page(page, live, PATH + "#model=gemma-3-27b")
    preset = next(
        p for p in requests.get(live.url + "/api/v1/kv-cache/presets").json()["presets"] if p["id"] == "gemma-3-27b"
    )
    answer = computed(live, "/api/v1/kv-cache", preset["request"])
    kinds = page.locator("[data-stage=memory-kinds]")
    assert answer["layers"]["local"]["layers"] == 52 and answer["layers"]["global"]["layers"] == 10
    text = kinds.inner_text()
    assert text.startswith("52 local layers:") and "× 1,024 positions" in text and "10 global layers:" in text
    assert "× 131,072 positions" in text and "62.0 GiB" in text  # every layer global: the 62.00 GiB
    for kind in ("local", "global"):  # each kind's bytes a token times its positions are its bytes (issue 65, C7)
        part = answer["layers"][kind]
        assert part["bytes_per_token"] * part["positions_cached"] == part["bytes"]
    assert answer["layers"]["local"]["bytes"] + answer["layers"]["global"]["bytes"] == answer["bytes_total"]


def test_every_presets_cache_by_kind_multiplies_out_to_its_total(live):
    for preset in requests.get(live.url + "/api/v1/kv-cache/presets", timeout=30).json()["presets"]:
        answer = computed(live, "/api/v1/kv-cache", preset["request"])
        kinds = answer.get("layers")
        if kinds is None:  # no window: one kind, every position
            assert answer["bytes_per_token"] * answer["positions_cached"] == answer["bytes_total"], preset["id"]
            continue
        for part in kinds.values():
            assert part["bytes_per_token"] * part["positions_cached"] == part["bytes"], preset["id"]
        assert sum(part["bytes"] for part in kinds.values()) == answer["bytes_total"], preset["id"]


LONG_LESSON = "/lessons/long-context"
LONG_EXPLANATIONS = {
    "en": "A window keeps only the last W positions in the cache, each in its slot; sinks keep the first ones.",
    "es": "Una ventana guarda en la caché solo las últimas W posiciones, cada una en su hueco; los sumideros "
    "guardan las primeras.",
    "zh-CN": "窗口只在缓存里保留最近的 W 个位置，每个在自己的槽位里；汇点保留最前面的位置，所以 softmax 不变。",
}


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("locale", ["en", "es", "zh-CN"])
def test_a_new_learner_completes_the_long_context_lesson(page, live, locale, size):
    def manipulate(frame):
        ids = frame.locator("[data-manipulation]").evaluate_all("items => items.map((i) => i.dataset.manipulation)")
        assert ids == ["slide-window", "keep-sinks", "sink-logit", "long-slip"]  # this lesson's, not the KV cache's
        frame.locator("#window").select_option("3")  # a window
        frame.locator("#sinks").select_option("1")  # a sink
        frame.locator("#sink-logit").check()  # the sink logits
        frame.locator("#compare").select_option("sinks_evicted")  # a long-context slip

    said = (
        "4,096 numbers a layer; 10.41 GiB as released, 62 GiB if every layer were global.",
        LONG_EXPLANATIONS[locale],
    )
    complete_lesson(page, live, LONG_LESSON, locale, SIZES[size], said, manipulate)
    assert overflow(page) == 0


def test_a_long_context_failure_mode_link_opens_in_the_lessons_own_explorable(page, live):
    open_page(page, live, LONG_LESSON)
    frame = embedded_workbench(page)
    page.locator("a[data-failure-mode=window_off_by_one]").click()
    expect(frame.locator("#compare")).to_have_value("window_off_by_one")
    assert frame.locator("#window").input_value() == "3"  # switched on, and said so
    expect(frame.locator("#kv-note")).to_contain_text("switched on")
    assert page.url.endswith(LONG_LESSON)  # the lesson stays


@pytest.mark.parametrize(
    ("lesson", "control", "value"),
    [(LONG_LESSON, "#window", "3"), ("/lessons/online-softmax", "#block", "4")],
)
def test_an_embedded_explorable_keeps_its_state_across_a_reload(page, live, lesson, control, value):
    """As the embedded workbench does (issue 65, C4): what the learner set is there again after a reload, in
    that lesson only."""
    open_page(page, live, lesson)
    frame = embedded_workbench(page)
    frame.locator(control).select_option(value)
    frame.locator("main[aria-busy=false]").wait_for()
    page.wait_for_timeout(300)
    page.reload()
    page.wait_for_selector("main[aria-busy=false]")
    again = embedded_workbench(page)
    expect(again.locator(control)).to_have_value(value)


@pytest.mark.parametrize("locale", ["en", "es"])
@pytest.mark.parametrize("size", SIZES)
def test_in_the_long_context_lesson_the_watched_weights_table_is_whole(page, live, size, locale):
    """Issue 65, C1 and C11: the weights manipulation 3 asks the learner to watch, its row-sum column included,
    are in view whole at 1280 x 800 and on a phone, not cut in a narrow scroll region."""
    page.set_viewport_size(dict(zip(("width", "height"), SIZES[size], strict=True)))
    open_page(page, live, f"{LONG_LESSON}?lang={locale}")
    frame = embedded_workbench(page)
    frame.locator("#window").select_option("3")
    frame.locator("#sink-logit").check()
    for _ in range(5):
        frame.locator("#step").click()
    expect(frame.locator("#step")).to_be_disabled()  # the last position drawn ("6" is also in "5 of 6")
    region = frame.locator(".kv-query-panel .scroll-region")
    region.scroll_into_view_if_needed()
    assert region.evaluate("r => r.scrollWidth <= r.clientWidth")  # every key and the row sum, no scrolling
    assert region.evaluate("r => r.getBoundingClientRect().right <= innerWidth")
    assert frame.locator(".kv-query-panel [data-stage=row-sum]").count() >= 4


def test_a_model_windowed_in_every_layer_shows_its_reach(page, live):
    """Issue 65, C10: Mistral 7B's 32 layers of a 4,096-key window reach L (W - 1) + 1 positions, as the API
    computes it and the lesson asks."""
    open_page(page, live, PATH + "#model=mistral-7b")
    preset = next(
        p for p in requests.get(live.url + "/api/v1/kv-cache/presets").json()["presets"] if p["id"] == "mistral-7b"
    )
    answer = computed(live, "/api/v1/kv-cache", preset["request"])
    assert answer["reach"] == 32 * (4096 - 1) + 1
    expect(page.locator("[data-stage=reach]")).to_contain_text("131,041 positions")
