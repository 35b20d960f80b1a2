"""The online softmax explorable and its lesson, as a learner uses them: every number drawn is the API's
(each tile's status, each row's m, alpha, l and O~ before and after it, the final division beside the
plain pass), a broken loop marks the tile where it first parts, the URL keeps the view, and the lesson's
four checkpoints complete in a browser at both sizes and in all three languages (implement with the
learner's own loop, answering fresh cases through the command the lesson shows)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import requests
from playwright.sync_api import expect

from ..exercise.test_online_submit import learner_file
from .conftest import complete_lesson, completed, computed, open_page, values, wait_for_checkpoint, wait_until
from .test_layout import SIZES, overflow

ROOT = Path(__file__).resolve().parents[2]
PATH = "/explorables/online-softmax"
LESSON = "/lessons/online-softmax"


def matrix(locator) -> list[float]:
    """Cells' values in row-major order, read by their data-row and data-col (a turned table lays them out by
    column on a phone)."""
    cells = locator.evaluate_all("cs => cs.map(c => [+c.dataset.row, +c.dataset.col, c.dataset.value])")
    return [None if v == "" else float(v) for _, _, v in sorted(cells)]


def whole(page) -> list[str]:
    """The watched tables (the tiles, the running values, the final division) a column of which is cut: wider
    than their scroll region, or the region not inside the viewport."""
    return page.evaluate(
        """() => [...document.querySelectorAll('.os-grid, .os-running-table, .os-final')].flatMap((t) => {
            const region = t.closest('.scroll-region'), box = region.getBoundingClientRect();
            const cut = region.scrollWidth > region.clientWidth + 1 || box.left < 0 || box.right > innerWidth;
            return cut ? [t.className + ': ' + region.scrollWidth + ' in ' + region.clientWidth] : [];
        })"""
    )


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
        assert matrix(running.locator("td[data-stage=o_tilde]")) == [v for row in tile["o_tilde"] for v in row]
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
def test_a_new_learner_completes_the_online_softmax_lesson(page, live, locale, size, tmp_path):
    def manipulate(frame):
        frame.locator("#step").click()  # a tile
        frame.locator("#block").select_option("8")  # one tile a head
        frame.locator("#step").click()  # ... and its end: the final division
        frame.locator("#compare").select_option("online_max_not_carried")  # break it

    said = ("6 skipped, 4 masked; 120 skipped of 256 at 1,024 positions.", EXPLANATIONS[locale])
    complete_lesson(page, live, LESSON, locale, SIZES[size], said, manipulate)
    assert overflow(page) == 0
    # implement: the panel's commands follow the explorable; a loop with a slip is named, the right one completes
    assert page.locator("#exercise-download").get_attribute("href") == "/api/v1/exercises/online-softmax/python.zip"
    assert page.locator("#exercise-test").inner_text() == "pytest exercises/online-softmax/tests"
    wait_until(page, "document.getElementById('exercise-trace').textContent.includes('block=8')")
    assert (
        page.locator("#exercise-trace")
        .inner_text()
        .startswith("python exercises/online-softmax/trace.py exercises/online-softmax/starter.py 'http")
    )
    page.locator("#new-challenge").click()
    page.locator("#challenge-command").wait_for()
    assert (
        page.locator("#challenge-command")
        .inner_text()
        .startswith("python exercises/online-softmax/submit.py exercises/online-softmax/starter.py --challenge http")
    )
    wrong = submit(page, learner_file(tmp_path, ("online_max_not_carried",)))
    assert wrong.returncode == 1 and "[online_max_not_carried]" in wrong.stdout, wrong.stdout + wrong.stderr
    expect(page.locator(".verdict.wrong")).to_contain_text("online_max_not_carried")
    right = submit(page, learner_file(tmp_path, ()))
    assert right.returncode == 0, right.stdout + right.stderr
    wait_for_checkpoint(page, "implement")
    assert completed(page) == {"predict", "experiment", "implement", "explain"}
    assert overflow(page) == 0


def submit(page, learner_file: Path) -> subprocess.CompletedProcess:
    """What the learner runs: the command the lesson shows, word for word, their file for the starter."""
    words = shlex.split(page.locator("#challenge-command").inner_text())
    words[next(i for i, w in enumerate(words) if "/starter." in w)] = str(learner_file)
    words[0] = sys.executable if words[0] == "python" else words[0]
    return subprocess.run(words, cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("locale", ["en", "es", "zh-CN"])
def test_the_exercises_trace_link_opens_the_explorable_at_the_slip_it_names(page, live, locale, size):
    """From the lesson: the download's starter traced against the explorable's own link, and the link the
    trace prints opens the explorable at the first tile that differs, with that slip chosen."""
    page.set_viewport_size(dict(zip(("width", "height"), SIZES[size], strict=True)))
    open_page(page, live, f"{LESSON}?lang={locale}")
    download = page.locator("a[href='/api/v1/exercises/online-softmax/python.zip']")
    assert download.count() == 1 and requests.get(live.url + download.get_attribute("href")).status_code == 200
    open_page(page, live, f"{PATH}?lang={locale}")
    page.locator("#block").select_option("4")
    wait_until(page, "location.hash.includes('block=4')")
    starter = ROOT / "exercises" / "online-softmax" / "starter.py"
    done = subprocess.run(
        [sys.executable, str(ROOT / "exercises/online-softmax/trace.py"), str(starter), page.url, "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(done.stdout)
    first = result["first_difference"]
    assert (first["query_block"], first["key_block"], first["what"]) == (1, 1, "skipped")  # the diagonal tile
    link = result["link"].replace("#", f"?lang={locale}#", 1)
    open_page(page, live, link.removeprefix(live.url))
    assert page.locator("#compare").input_value() == "online_diagonal_skipped"
    assert page.locator("[data-loop=broken] [data-stage=running]").get_attribute("data-status") == "skipped"
    assert page.locator("[data-loop=yours] [data-stage=running]").get_attribute("data-status") == "skipped"
    marked = page.locator("[data-stage=tiles] td.first-difference").evaluate_all("cs => cs.map(c => c.dataset.tile)")
    assert set(marked) == {"0"}  # the first tile: where the starter's loop first parts from the right one
    assert overflow(page) == 0


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("locale", ["en", "es"])
def test_the_trace_link_draws_the_learners_own_values_beside_the_right_loops(page, live, locale, size, tmp_path):
    """Issue 65 (C3): a learner's loop with the diagonal fixed but nothing rescaled, traced against the
    explorable's link: the link it prints draws, at the tile where the loop first parts, the learner's own m,
    alpha, l and O~ (as their function recorded them) beside the right loop's (as the API computes it)."""
    page.set_viewport_size(dict(zip(("width", "height"), SIZES[size], strict=True)))
    mine = tmp_path / "mine.py"
    starter = (ROOT / "exercises" / "online-softmax" / "starter.py").read_text()
    mine.write_text(starter.replace("c1 - 1 > r0", "c0 > r1 - 1"))  # the diagonal computed; two slips remain
    done = subprocess.run(
        [sys.executable, str(ROOT / "exercises/online-softmax/trace.py"), str(mine), f"{live.url}{PATH}#block=2"],
        capture_output=True,
        text=True,
    )
    link = next(line for line in done.stdout.splitlines() if line.startswith("See it drawn: ")).split(": ", 1)[1]
    result = json.loads(
        subprocess.run(
            [sys.executable, str(ROOT / "exercises/online-softmax/trace.py"), str(mine), link, "--json"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    first = result["first_difference"]
    open_page(page, live, link.replace("#", f"?lang={locale}#", 1).removeprefix(live.url))
    index = int(page.evaluate("new URLSearchParams(location.hash.slice(1)).get('tile')")) - 1
    yours = page.locator("[data-loop=yours] [data-stage=running]")
    expect(yours).to_be_visible()
    for name, key in (("m", "m"), ("alpha", "alpha"), ("l", "l")):
        assert values(yours.locator(f"td[data-stage={name}]")) == pytest.approx(first["yours"][key], rel=1e-5)
    drawn = matrix(yours.locator("td[data-stage=o_tilde]"))
    assert drawn == pytest.approx([x for row in first["yours"]["o"] for x in row], rel=1e-5, abs=1e-12)
    right = tiled(live, 2)["heads"][0]["tiles"][index]
    for name in ("m", "alpha", "l"):
        assert values(page.locator(f"[data-loop=right] td[data-stage={name}]")) == pytest.approx(right[name], abs=1e-12)
        assert right[name] == pytest.approx(first["correct"][name], abs=1e-9)  # the engine's loop is the trace's
    assert overflow(page) == 0


SLIPS = ["online_no_rescale", "online_max_not_carried", "online_diagonal_skipped"]


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("locale", ["en", "es"])
@pytest.mark.parametrize("block", [1, 2, 4])
@pytest.mark.parametrize("slip", SLIPS)
def test_every_slip_at_every_block_size_draws_both_loops_where_it_parts_and_its_final_division(
    page, live, slip, block, locale, size
):
    """Issue 65 (B1, C2): at the tile where a slip first parts, the right loop's values beside the broken
    one's, each as the API computed it (the maximum the broken loop really carried included); at the end
    the final division drawn, rows that saw no key with l = 0; no page error anywhere."""
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.set_viewport_size(dict(zip(("width", "height"), SIZES[size], strict=True)))
    broken, right = tiled(live, block, slip), tiled(live, block)
    total = len(broken["heads"][0]["tiles"])
    first = broken["first_difference"]
    head = first["head"] if first else 0
    if first and first["tile"] is not None:
        open_page(page, live, f"{PATH}?lang={locale}#block={block}&head={head}&tile={first['tile'] + 1}&compare={slip}")
        for loop, answer in (("right", right), ("broken", broken)):
            tile = answer["heads"][head]["tiles"][first["tile"]]
            running = page.locator(f"[data-loop={loop}] [data-stage=running]")
            assert running.get_attribute("data-status") == tile["status"], loop
            if tile["status"] != "skipped":
                for name in ("m", "alpha", "l"):
                    assert values(running.locator(f"td[data-stage={name}]")) == tile[name], (loop, name)
                assert values(running.locator("td[data-stage=m-before]")) == tile["m_before"], loop
        assert whole(page) == []  # every column of the tiles and both loops' values in view (C11)
    open_page(page, live, f"{PATH}?lang={locale}#block={block}&head={head}&tile={total}&compare={slip}")
    final = page.locator("[data-stage=final]")
    expect(final).to_be_visible()
    ls = values(final.locator("td[data-stage=l]"))
    assert len(ls) == 8 and all(v is not None and v >= 0 for v in ls)
    assert errors == [] and overflow(page) == 0 and whole(page) == []
    page.reload()  # the state is back: the same slip, block size and step
    page.wait_for_selector("main[aria-busy=false]")
    expect(page.locator("[data-stage=final]")).to_be_visible()
    assert (page.locator("#compare").input_value(), page.locator("#block").input_value()) == (slip, str(block))
    assert values(page.locator("[data-stage=final] td[data-stage=l]")) == ls
