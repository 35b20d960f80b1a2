"""The workbench as a learner works it: the lesson's manipulations, every control the API has,
and every stage's numbers in the DOM equal to the engine's for the same request (the contract:
`[data-stage][data-head] [data-variant] [data-row][data-col][data-value]`)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qsl, urlencode

import numpy as np
import pytest
import requests
from playwright.sync_api import expect

from service.compute.failure_modes import REGISTRY

from ..compute.plain_python import WORKBENCH_MEETS
from ..exercise.test_exercise import SEED_COMMAND, TYPESCRIPT_READY
from .conftest import VIEWPORTS, open_page, wait_until

PATH = "/explorables/multi-head-attention"
TOKENS = [[1.0, 0.5, -0.5, 1.0], [0.2, 1.0, 1.5, -0.3], [-1.0, 0.3, 0.8, 0.6]]
PER_HEAD = {"q": "query", "k": "key", "v": "value", "scores": "scores", "weights": "weights", "head-output": "output"}
IDENTITY = [[1.0 if i == j else 0.0 for j in range(4)] for i in range(4)]


def renders(page):
    return int(page.evaluate("performance.getEntriesByName('workbench-render').length"))


def after(page, action):
    before = renders(page)
    action()
    wait_until(page, f"performance.getEntriesByName('workbench-render').length > {before}")


def edit(page, token, dimension, value):
    after(page, lambda: page.get_by_label(f"Token {token} dimension {dimension}", exact=True).fill(str(value)))


def toggle(page, label):
    after(page, lambda: page.get_by_label(label, exact=True).click())


def stage(page, name, head=None, variant="main"):
    """A stage's numbers as the DOM holds them: a matrix from data-row/col/value."""
    where = f'[data-stage="{name}"]' + ("" if head is None else f'[data-head="{head}"]')
    cells = page.eval_on_selector_all(
        f'{where} [data-variant="{variant}"] [data-row][data-col][data-value]',
        "els => els.map(e => [Number(e.dataset.row), Number(e.dataset.col), Number(e.dataset.value)])",
    )
    if not cells:
        return None
    rows = max(r for r, _, _ in cells) + 1
    cols = max(c for _, c, _ in cells) + 1
    matrix = [[None] * cols for _ in range(rows)]
    for r, c, v in cells:
        assert matrix[r][c] is None, f"{where}: cell {r},{c} twice"
        matrix[r][c] = v
    return matrix


def learned(live):
    return requests.get(live.url + "/api/v1/presets/workbench-learned").json()["request"]["projections"]


def body_of(live, heads=2, kv=None, causal=True, rope=None, qkv=False, wo=False, failure_mode=None):
    """The request the configuration means, built here from the API's own preset."""
    body = {"tokens": TOKENS, "heads": heads, "causal": causal}
    kv = kv or heads
    if kv != heads:
        body["kv_heads"] = kv
    if rope:
        body["rope"] = {"style": rope, "base": 10000}
    projections = {}
    preset = learned(live) if qkv or wo else None
    width = 4 // heads * kv
    if qkv:
        projections = {"query": preset["query"], **{p: [row[:width] for row in preset[p]] for p in ("key", "value")}}
    if wo:
        projections["output"] = preset["output"]
    if projections:
        body["projections"] = projections
    if failure_mode:
        body["failure_mode"] = failure_mode
    return body


def link(heads=2, kv=None, causal=True, rope=None, qkv=False, wo=False, compare=None, reuse=False):
    params = {
        "t": ";".join(",".join(str(v) for v in row) for row in TOKENS),
        "causal": int(causal),
        "reuse": int(reuse),
    }
    if compare:
        params["compare"] = compare
    params.update(heads=heads, kv=kv or heads)
    if rope:
        params["rope"] = rope
    if qkv:
        params["qkv"] = "learned"
    if wo:
        params["wo"] = "learned"
    return f"{PATH}#{urlencode(params)}"


def expected_stages(trace, tokens, w_o):
    """stage -> [(head, matrix)] from an API trace."""
    out = {"x": [(None, tokens)], "wo": [(None, w_o)]}
    for name, part in PER_HEAD.items():
        out[name] = [(h["index"], h[part]) for h in trace["heads"]]
    for name in ("concat", "output", "residual"):
        out[name] = [(None, trace[name])]
    return out


def assert_every_stage_equals(page, trace, w_o, variant="main", only=None):
    """`only`: the stage names to check, or (name, head) pairs (head None for a shared stage)."""
    for name, items in expected_stages(trace, TOKENS, w_o).items():
        for head, matrix in items:
            if only is not None and name not in only and (name, head) not in only:
                continue
            assert stage(page, name, head, variant) == matrix, f"{variant} {name} head {head}"


def differing_by_head(correct, broken, w_o, broken_wo):
    """(stage, head) pairs whose numbers differ, from the two traces themselves (head None: shared)."""
    theirs = expected_stages(broken, TOKENS, broken_wo)
    found = set()
    for name, items in expected_stages(correct, TOKENS, w_o).items():
        for (head, matrix), (_, other) in zip(items, theirs.get(name, []), strict=False):
            if name != "x" and (
                len(matrix) != len(other)
                or any(
                    len(a) != len(b) or any(abs(x - y) > 1e-9 * max(1.0, abs(x)) for x, y in zip(a, b, strict=True))
                    for a, b in zip(matrix, other, strict=True)
                )
            ):
                found.add((name, head))
    return found


def test_inputs_and_controls_are_found_by_their_names(page, live):
    open_page(page, live, PATH)
    for t in range(1, 4):
        for d in range(1, 5):
            assert page.get_by_label(f"Token {t} dimension {d}", exact=True).count() == 1
    for name in ("Causal mask", "Reuse head 1 features for both heads (broken)", "Compare with"):
        assert page.get_by_label(name, exact=True).count() == 1, name
    assert page.get_by_label("RoPE", exact=False).first.is_visible()
    assert page.get_by_label("output projection", exact=False).count() == 1
    options = page.eval_on_selector_all("#compare option", "os => os.map(o => o.value).filter(Boolean)")
    registry = requests.get(live.url + "/api/v1/failure-modes").json()["failure_modes"]
    modes = [m["id"] for m in registry if m["engine"] and set(m["needs"]) <= WORKBENCH_MEETS]
    assert options == modes and "no_output_projection" in options and "gqa_tiled" in options


def test_changing_the_last_two_coordinates_changes_only_head_2(page, live):
    open_page(page, live, PATH)
    head1, head2 = stage(page, "weights", 0), stage(page, "weights", 1)
    edit(page, 3, 3, 2.5)
    edit(page, 3, 4, -1.5)
    assert stage(page, "weights", 0) == head1
    assert stage(page, "weights", 1) != head2


def test_changing_the_first_two_coordinates_changes_only_head_1(page, live):
    open_page(page, live, PATH)
    head1, head2 = stage(page, "weights", 0), stage(page, "weights", 1)
    edit(page, 2, 1, -2)
    edit(page, 2, 2, 0.7)
    assert stage(page, "weights", 1) == head2
    assert stage(page, "weights", 0) != head1


def test_turning_the_mask_off_reveals_future_columns(page, live):
    open_page(page, live, PATH)
    future = "#heatmap-0 td.masked"
    assert page.locator(future).count() == 3
    toggle(page, "Causal mask")
    assert page.locator(future).count() == 0
    weights = stage(page, "weights", 0)
    assert all(weights[r][c] > 0 for r in range(3) for c in range(3) if c > r)


def test_broken_reuse_makes_both_heads_identical(page, live):
    open_page(page, live, PATH)
    assert stage(page, "weights", 0) != stage(page, "weights", 1)
    toggle(page, "Reuse head 1 features for both heads (broken)")
    assert stage(page, "weights", 0) == stage(page, "weights", 1)
    assert "dimensions 3–4 are ignored" in page.locator("#status").inner_text()


CONFIGURATIONS = {
    "the lesson's case": {},
    "no causal mask": {"causal": False},
    "RoPE half, one head": {"heads": 1, "rope": "half"},
    "RoPE interleaved, one head": {"heads": 1, "rope": "interleaved"},
    "RoPE with two heads": {"rope": "half"},
    "learned projections": {"qkv": True, "wo": True},
    "four heads sharing two K/V heads": {"heads": 4, "kv": 2, "qkv": True},
    "multi-query": {"kv": 1},
}


@pytest.mark.parametrize("name", CONFIGURATIONS)
def test_every_stage_drawn_equals_the_engine(page, live, name):
    config = CONFIGURATIONS[name]
    open_page(page, live, link(**config))
    trace = requests.post(live.url + "/api/v1/attention", json=body_of(live, **config)).json()
    w_o = learned(live)["output"] if config.get("wo") else IDENTITY
    assert_every_stage_equals(page, trace, w_o)
    if config.get("rope"):  # Q and K are after the rotation; before it, the plain slices are shown too
        plain = requests.post(live.url + "/api/v1/attention", json={**body_of(live, **config), "rope": None}).json()
        assert trace["heads"][0]["query"] != plain["heads"][0]["query"]
        assert trace["heads"][0]["query_before_rope"] == plain["heads"][0]["query"]
        assert page.locator('[data-stage="q"][data-head="0"] [data-part="query_before_rope"]').count() == 1
    assert page.locator("[data-stage=weights]").count() == trace["shape"]["heads"]


def test_every_control_changes_the_request_and_stays_in_the_link(page, live, context):
    open_page(page, live, PATH)
    after(page, lambda: page.get_by_label("Heads H").select_option("1"))
    after(page, lambda: page.get_by_label("RoPE on Q and K").select_option("interleaved"))
    page.get_by_label("RoPE base").fill("100")
    after(page, lambda: page.get_by_label("RoPE base").press("Tab"))  # committed when the field is left
    assert "base=100" in page.evaluate("location.hash")
    after(page, lambda: page.get_by_label("W_O output projection").select_option("learned"))
    after(page, lambda: page.get_by_label("Q, K, V projections").select_option("learned"))
    other = context.new_page()
    other.goto(live.url + PATH + page.evaluate("location.hash"))
    other.wait_for_selector("main[aria-busy=false]")
    body = {**body_of(live, heads=1, qkv=True, wo=True), "rope": {"style": "interleaved", "base": 100}}
    trace = requests.post(live.url + "/api/v1/attention", json=body).json()
    assert_every_stage_equals(other, trace, learned(live)["output"])
    assert other.get_by_label("RoPE on Q and K").input_value() == "interleaved"


def test_grouped_query_attention_says_which_heads_share(page, live):
    open_page(page, live, link(heads=4, kv=2))
    titles = page.eval_on_selector_all(".lane-title", "els => els.map(e => e.textContent)")
    assert "shared with head 2" in titles[0] and "K/V head 2, shared with head 4" in titles[2]
    assert page.get_by_label("K/V heads").input_value() == "2"


# Every failure mode the workbench's menu offers (the engine's, less decoding's and long contexts': the KV cache page),
# each in a case where it shows: tiling the K/V heads differs only with several per group.
MODES = [m for m, spec in REGISTRY.items() if spec.engine and set(spec.needs) <= WORKBENCH_MEETS]
SHAPE_FOR = {"gqa_tiled": {"heads": 4, "kv": 2}}


@pytest.mark.parametrize("size", VIEWPORTS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("wo", [False, True], ids=["identity W_O", "mixing W_O"])
def test_broken_beside_correct_from_the_first_divergence(page, live, mode, wo, size):
    page.set_viewport_size(VIEWPORTS[size])
    shape = SHAPE_FOR.get(mode, {})
    open_page(page, live, link(wo=wo, compare=mode, **shape))
    body = body_of(live, wo=wo, failure_mode=mode, **shape)
    result = requests.post(live.url + "/api/v1/attention/compare", json=body).json()
    w_o = learned(live)["output"] if wo else IDENTITY
    assert_every_stage_equals(page, result["correct"], w_o)
    divergence = result["divergence"]
    marked = page.eval_on_selector_all("[data-divergence=first]", "els => [...new Set(els.map(e => e.dataset.stage))]")
    assert marked == ([divergence["first"]] if divergence["first"] else [])
    broken_wo = IDENTITY if mode == "no_output_projection" else w_o
    differs = differing_by_head(result["correct"], result["broken"], w_o, broken_wo)
    assert_every_stage_equals(page, result["broken"], broken_wo, variant="broken", only=differs)
    # marked diverging exactly where the numbers differ, head by head; an identical head reads so
    shown = page.eval_on_selector_all(
        "[data-stage][data-divergence]",
        "els => els.map(e => [e.dataset.stage, e.dataset.head === undefined ? null : Number(e.dataset.head),"
        " e.dataset.divergence])",
    )
    assert {(s, h) for s, h, d in shown if d in ("first", "after")} == differs
    for s, h, d in shown:
        if d == "identical":
            assert (s, h) not in differs and any(s == name for name, _ in differs), (s, h)
    said = page.eval_on_selector_all(".lane[data-identical=true]", "els => els.map((e) => Number(e.dataset.head))")
    heads = {h for s, h in differs if s in PER_HEAD}
    every = set(range(shape.get("heads", 2)))
    assert set(said) == (every - heads if heads else set())  # a head with no differing number says so once
    for name, items in expected_stages(result["correct"], TOKENS, w_o).items():
        for head, _ in items:
            if (name, head) not in differs:
                assert stage(page, name, head, "broken") is None, (name, head)
    if mode == "no_output_projection":
        assert divergence["first"] == ("wo" if wo else None)
        if not wo:
            # W_O drawn with its subscript, as everywhere in the diagram
            assert "Nothing differs: W<sub>O</sub> here is the identity" in page.locator("#status").inner_html()


def test_a_weight_replays_its_story_with_the_engines_numbers(page, live):
    open_page(page, live, link(heads=1, rope="half"))
    trace = requests.post(live.url + "/api/v1/attention", json=body_of(live, heads=1, rope="half")).json()
    cell = page.locator('[data-stage=weights][data-head="0"] [data-variant=main] td[data-row="2"][data-col="1"] button')
    cell.focus()
    page.keyboard.press("Enter")
    replay = page.locator("[data-replay]")
    replay.wait_for()
    assert (replay.get_attribute("data-head"), replay.get_attribute("data-row"), replay.get_attribute("data-col")) == (
        "0",
        "2",
        "1",
    )
    head = trace["heads"][0]
    q, k = head["query"][2], head["key"][1]
    steps = replay.locator("[data-step]")
    values = {s.get_attribute("data-step"): s.get_attribute("data-value") for s in steps.all()}
    products = {
        int(s.get_attribute("data-dim")): float(s.get_attribute("data-value"))
        for s in replay.locator("[data-step=product]").all()
    }
    assert products == {d: q[d] * k[d] for d in range(4)}
    assert float(values["dot"]) == pytest.approx(sum(q[d] * k[d] for d in range(4)), abs=1e-12)
    assert float(values["scaled"]) == head["scores"][2][1]
    assert float(values["weight"]) == head["weights"][2][1]
    assert json.loads(values["residual"]) == trace["residual"][2]
    shown = replay.locator("[data-step]:visible").count()
    replay.focus()
    page.keyboard.press("ArrowRight")
    wait_until(page, f"document.querySelectorAll('[data-step]:not([hidden])').length > {shown}")
    assert "cell=0%2C2%2C1" in page.url or "cell=0,2,1" in page.url


def test_hovering_a_head_lights_it_everywhere(page, live):
    open_page(page, live, PATH)
    page.locator('.lane[data-head="1"] .lane-title').hover()
    assert page.locator("main").get_attribute("data-lit") == "1"
    owners = page.eval_on_selector_all("[data-stage=x] td[data-owner]", "els => els.map(e => e.dataset.owner)")
    assert owners == ["0", "0", "1", "1"] * 3
    dimmed = page.eval_on_selector_all(
        "[data-stage=concat] [data-variant=main] td", "els => els.map(e => getComputedStyle(e).opacity)"
    )
    assert dimmed[:2] == ["0.3", "0.3"] and dimmed[2:4] == ["1", "1"]


def progress(page, live):
    learner = page.evaluate("fetch('/api/v1/session', {method: 'POST'}).then(r => r.json()).then(b => b.learner)")
    response = page.request.get(f"{live.url}/api/v1/learners/{learner}/progress?lesson=multi-head-attention")
    assert response.status == 200
    return next(c for c in response.json()["lessons"][0]["checkpoints"] if c["id"] == "experiment")


def sent(page):
    wait_until(page, "JSON.parse(localStorage.getItem('workbench.outbox') || '[]').length === 0", timeout=15)


def test_one_edit_does_not_complete_the_experiment_the_four_manipulations_do(page, live):
    open_page(page, live, PATH)
    edit(page, 1, 3, 2)
    page.wait_for_timeout(600)  # past the debounce
    sent(page)
    state = progress(page, live)
    assert state["completed"] is False and state["manipulations"] == ["last-two"]
    assert page.locator('[data-manipulation="last-two"]').get_attribute("data-done") == "true"
    assert page.locator('[data-manipulation="first-two"]').get_attribute("data-done") == "false"
    edit(page, 1, 1, -1)
    page.wait_for_timeout(600)
    sent(page)
    page.reload()  # midway: the ticks come back from the server
    page.wait_for_selector("main[aria-busy=false]")
    wait_until(page, "document.querySelector('[data-manipulation=\"first-two\"]').dataset.done === 'true'")
    toggle(page, "Causal mask")
    toggle(page, "Reuse head 1 features for both heads (broken)")
    page.wait_for_timeout(600)
    sent(page)
    assert progress(page, live)["completed"] is True
    assert page.locator("[data-done=true]").count() == 4


@pytest.mark.parametrize("size", VIEWPORTS)
@pytest.mark.parametrize("where", [{"qkv": True}, {"heads": 4}], ids=["learned projections", "four heads"])
def test_token_edits_outside_the_lessons_case_do_not_tick_and_say_why(page, live, where, size):
    page.set_viewport_size(VIEWPORTS[size])
    """The finding: token edits under learned projections or four heads silently did not count.
    Now a note under the tokens just edited says so and why, in view at both sizes, and one click
    returns to the teaching case, where the next edit counts."""
    open_page(page, live, link(**where))
    note = page.locator("[data-note=not-counted]")
    assert note.count() == 0
    edit(page, 1, 3, 2)
    assert page.locator('[data-manipulation="last-two"]').get_attribute("data-done") == "false"
    note.wait_for()
    assert note.is_visible() and "teaching case" in note.inner_text()
    assert note.evaluate("n => n.previousElementSibling.id === 'tokens'")  # where the edit happened
    box, height = note.bounding_box(), page.viewport_size["height"]
    assert box["y"] >= 0 and box["y"] + box["height"] <= height  # in the viewport, not below the fold
    note.get_by_role("button", name="Back to the teaching case").click()
    page.wait_for_selector("main[aria-busy=false]")
    assert note.count() == 0
    assert page.get_by_label("Heads H").input_value() == "2"
    edit(page, 1, 4, 1.5)
    wait_until(page, "document.querySelector('[data-manipulation=\"last-two\"]').dataset.done === 'true'")


def test_the_url_hash_reproduces_the_state(page, live, context):
    open_page(page, live, PATH)
    edit(page, 2, 4, 3.5)
    toggle(page, "Causal mask")
    other = context.new_page()
    other.goto(page.url)
    other.wait_for_selector("main[aria-busy=false]")
    assert other.get_by_label("Token 2 dimension 4", exact=True).input_value() == "3.5"
    assert other.get_by_label("Causal mask", exact=True).is_checked() is False
    assert stage(other, "weights", 1) == stage(page, "weights", 1)


# Your own code beside the engine's (the exercise's trace script) and "Save as a test".

ROOT = Path(__file__).resolve().parents[2]
HANDWRITTEN = ROOT / "tests" / "exercise" / "implementations" / "handwritten.py"
TRACE = ROOT / "exercises" / "multi-head-attention" / "trace.py"


def traced_link(live, mistake: str, wo: bool = True) -> str:
    link = f"{live.url}{PATH}#t=" + ";".join(",".join(str(v) for v in row) for row in TOKENS) + "&causal=1"
    done = subprocess.run(
        [sys.executable, str(TRACE), str(HANDWRITTEN), link + ("&wo=learned" if wo else ""), "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "MHA_MISTAKE": mistake},
        timeout=60,
    )
    return json.loads(done.stdout)


@pytest.mark.parametrize("mistake", ["no_scaling", "swapped_head_order", "no_output_projection"])
def test_the_trace_link_shows_yours_beside_correct_from_the_first_difference(page, live, mistake):
    result = traced_link(live, mistake)
    page.goto(result["link"])
    page.wait_for_selector("main[aria-busy=false]")
    marked = page.eval_on_selector_all("[data-divergence=first]", "els => [...new Set(els.map(e => e.dataset.stage))]")
    assert marked == [result["first_divergence"]]
    assert "Your numbers first differ from the engine's at" in page.locator("#status").inner_text()
    assert page.locator("#back-to-lesson").get_attribute("href") == "/lessons/multi-head-attention"  # a way back
    yours = json.loads(dict(parse_qsl(result["link"].split("#", 1)[1]))["yours"])
    page.get_by_role("button", name="Show every number").click()
    for name in ("weights", "head-output"):
        for head in range(2):
            assert np.allclose(stage(page, name, head, "yours"), yours[name][head], atol=1e-9), (name, head)
    for name in ("concat", "output"):
        assert np.allclose(stage(page, name, None, "yours"), yours[name], atol=1e-9), name
    # the stages before the first difference show no "yours" column that differs
    assert page.locator('[data-stage="head-output"] [data-divergence]').count() == 0 or result["first_divergence"] in (
        "weights",
        "head-output",
    )


def test_a_correct_trace_says_your_numbers_equal_the_engines(page, live):
    result = traced_link(live, "")
    assert result["first_divergence"] == "identical"
    page.goto(result["link"])
    page.wait_for_selector("main[aria-busy=false]")
    assert (
        page.locator("#status").inner_text() == "Your numbers equal the engine's at every stage your function returns."
    )
    assert page.locator("[data-divergence]").count() == 0


def saved(page, which: str) -> str:
    page.get_by_role("button", name="Save as a test").click()
    page.locator(f"#saved-{which}").wait_for()
    return page.locator(f"#saved-{which}").inner_text()


def exercise_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "exercise"
    shutil.copytree(ROOT / "exercises" / "multi-head-attention", copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


@pytest.mark.parametrize("wo", [False, True])
def test_save_as_a_test_gives_a_pytest_that_passes_correct_code_and_fails_a_mistake(page, live, tmp_path, wo):
    open_page(page, live, PATH + ("#wo=learned" if wo else ""))
    edit(page, 2, 3, 2.5)
    snippet = saved(page, "pytest")
    copy = exercise_copy(tmp_path)
    tests = copy / "tests" / "test_multi_head_attention.py"
    tests.write_text(tests.read_text() + "\n\n" + snippet + "\n")
    name = snippet.split("(", 1)[0].removeprefix("def ")

    def run(mistake):
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                str(copy / "tests"),
                "-o",
                "addopts=",
                "-p",
                "no:cacheprovider",
                "-k",
                name,
            ],
            env={
                **os.environ,
                "MHA_EXERCISE": str(HANDWRITTEN),
                "MHA_MISTAKE": mistake,
                "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
            },
            capture_output=True,
            text=True,
            timeout=60,
        )

    correct = run("")
    assert correct.returncode == 0 and "1 passed" in correct.stdout, correct.stdout
    wrong = run("no_output_projection" if wo else "no_scaling")
    assert wrong.returncode == 1 and "from the workbench's" in wrong.stdout, wrong.stdout


def test_save_as_a_test_gives_a_vitest_that_passes_correct_code_and_fails_a_mistake(page, live, tmp_path):
    if not TYPESCRIPT_READY:
        pytest.skip("the TypeScript track needs Node 20, pnpm and `pnpm install`")
    open_page(page, live, PATH + "#wo=learned&causal=0")
    snippet = saved(page, "vitest")
    # A copy of the exercise of its own, where vitest's configuration finds test files (exercises/**/tests),
    # never in the exercise's own folder, which other tests run at the same time.
    copy = ROOT / "exercises" / f"saved-{os.getpid()}-{tmp_path.name}"
    shutil.copytree(ROOT / "exercises" / "multi-head-attention", copy, ignore=shutil.ignore_patterns("__pycache__"))
    suite = copy / "tests" / "saved-case.test.ts"
    original = (copy / "tests" / "multi-head-attention.test.ts").read_text()
    try:
        suite.write_text(original + "\n" + snippet + "\n")
        name = snippet.split('"', 2)[1]

        def run(mistake):
            env = {**os.environ, "MHA_EXERCISE": str(HANDWRITTEN.with_suffix(".ts")), "MHA_MISTAKE": mistake}
            command = [*SEED_COMMAND[:4], str(suite), "--config", "vitest.exercise.config.ts", "-t", name]
            return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)

        correct = run("")
        assert correct.returncode == 0, correct.stdout + correct.stderr
        wrong = run("swapped_head_order")
        assert wrong.returncode == 1 and "from the workbench's" in wrong.stdout + wrong.stderr
    finally:
        shutil.rmtree(copy, ignore_errors=True)


def test_save_as_a_test_says_why_a_case_beyond_the_exercise_cannot_be_one(page, live):
    open_page(page, live, PATH + "#rope=half")
    page.get_by_role("button", name="Save as a test").click()
    note = page.locator("#saved-test .note")
    note.wait_for()
    assert "RoPE is on" in note.inner_text() and page.locator("#saved-pytest").count() == 0


@pytest.mark.parametrize("size", VIEWPORTS)
@pytest.mark.parametrize("where", [{"reuse": True}, {"compare": "swapped_head_order"}], ids=["reuse", "comparison"])
def test_the_concatenations_numbers_show_without_a_click_where_the_lesson_asks_for_them(page, live, where, size):
    page.set_viewport_size(VIEWPORTS[size])
    open_page(page, live, link(**where))
    cells = page.locator('[data-stage="concat"] [data-variant="main"] td[data-value]')
    assert cells.count() == len(TOKENS) * len(TOKENS[0])  # all n x d_model of them
    assert all(cells.nth(k).is_visible() for k in range(cells.count()))
    owners = cells.evaluate_all("cs => cs.map((c) => [c.dataset.owner, getComputedStyle(c).backgroundColor])")
    colours = {owner: colour for owner, colour in owners}
    assert set(colours) == {"0", "1"} and colours["0"] != colours["1"]  # the two heads' halves told apart
    body = body_of(live, failure_mode="reuse_first_slice") if "reuse" in where else body_of(live)
    concat = requests.post(live.url + "/api/v1/attention", json=body).json()["concat"]
    shown = [float(v) for v in cells.evaluate_all("cs => cs.map((c) => c.dataset.value)")]
    assert shown == [v for row in concat for v in row]


def test_the_concatenation_stays_folded_in_the_plain_case(page, live):
    open_page(page, live, PATH)
    assert not page.locator('[data-stage="concat"] [data-variant="main"] td[data-value]').first.is_visible()


def linked(page):
    return set(
        map(
            tuple,
            page.eval_on_selector_all(
                '[data-linked="true"][data-row]',
                "els => els.map((e) => [e.closest('[data-stage]').dataset.stage,"
                " e.closest('[data-stage]').dataset.head, Number(e.dataset.row)])",
            ),
        )
    )


@pytest.mark.parametrize("size", VIEWPORTS)
@pytest.mark.parametrize("how", ["hover", "focus"])
def test_a_weight_links_the_rows_it_came_from_and_the_row_it_feeds(page, live, how, size):
    """Head 2's weight of query 3 on key 1 came from Q row 3 and K row 1 of head 2, mixes V row 1,
    and feeds head 2's output row 3: those are marked (data-linked), nothing of head 1."""
    page.set_viewport_size(VIEWPORTS[size])
    open_page(page, live, PATH)
    cell = page.locator('[data-stage="weights"][data-head="1"] [data-variant="main"] td[data-row="2"][data-col="0"]')
    if how == "hover":
        cell.hover()
    else:
        cell.locator("button").focus()
    marked = linked(page)
    assert {(s, r) for s, h, r in marked if s != "weights"} == {("q", 2), ("k", 0), ("v", 0), ("head-output", 2)}
    assert {h for _, h, _ in marked} == {"1"}
    assert page.locator('[data-stage="q"][data-head="1"]').get_attribute("data-linked") == "true"
    assert page.locator('[data-stage="q"][data-head="0"]').get_attribute("data-linked") is None
    if how == "hover":
        page.mouse.move(1, 1)
    else:
        page.get_by_label("Causal mask", exact=True).focus()
    assert linked(page) == set()


@pytest.mark.parametrize("size", VIEWPORTS)
def test_one_notation_for_subscripts_in_the_diagram_and_the_lesson(page, live, size):
    """A matrix's index is a subscript wherever the learner reads it (W_O as W<sub>O</sub>, like Q<sub>1</sub>)."""
    page.set_viewport_size(VIEWPORTS[size])
    open_page(page, live, PATH)
    titles = page.eval_on_selector_all(".stage-title", "els => els.map((e) => e.innerHTML)")
    assert any("W<sub>O</sub>" in title for title in titles) and any("Q<sub>1</sub>" in title for title in titles)
    drawn = page.locator("#diagram").inner_text() + page.locator("#status").inner_text()
    assert "W_" not in drawn and "O_1" not in drawn  # no underscore notation, no second style
    open_page(page, live, "/lessons/multi-head-attention")
    prose = page.locator("#lesson-body").inner_html()
    assert "W<sub>O</sub>" in prose
    assert "<code>" in prose and "d_model" in prose  # code and the API's names stay as written


# What each manipulation changes, and the control the learner needs next (the lesson's order).
NEXT = [
    ("#token-1-dim-3", "2", "#token-2-dim-1"),
    ("#token-2-dim-1", "-1", "#causal"),
    ("#causal", None, "#reuse"),
    ("#reuse", None, None),
]


@pytest.mark.parametrize("size", VIEWPORTS)
def test_after_each_manipulation_the_next_control_takes_a_click_and_nothing_covers_the_changed_cells(page, live, size):
    """The notice that says a manipulation is done takes its own line: the next control is what a
    press at its centre reaches, at once, and no notice lies over a weight of the heads."""
    page.set_viewport_size(VIEWPORTS[size])
    open_page(page, live, PATH)
    for n, (control, value, following) in enumerate(NEXT, start=1):
        if value is None:
            page.locator(control).click()
        else:
            page.locator(control).fill(value)
        notice = page.locator("[data-announce=checkpoint]")
        expect(notice).to_contain_text(f"{n} of 4" if n < 4 else "All four manipulations done")
        covered = page.evaluate(
            """() => { const n = document.querySelector('[data-announce=checkpoint]').getBoundingClientRect();
                 return [...document.querySelectorAll('input, select, button, [data-stage=weights] td')].filter((e) => {
                   const b = e.getBoundingClientRect();
                   const apart = b.right <= n.left || n.right <= b.left || b.bottom <= n.top || n.bottom <= b.top;
                   return b.width && !apart; }).length; }"""
        )
        assert covered == 0
        if following:
            page.locator(following).scroll_into_view_if_needed()
            reached = page.evaluate(
                """(s) => { const e = document.querySelector(s), b = e.getBoundingClientRect();
                     const at = document.elementFromPoint(b.left + b.width / 2, b.top + b.height / 2);
                     return at === e || e.contains(at) || (at && at.htmlFor === e.id); }""",
                following,
            )
            assert reached, following
