"""The online-softmax exercise (exercises/online-softmax), run as a learner runs it.

Its own slips module and the engine's tiled loop are two writings of the same three slips: they agree
on every combination. The engine's loop passes every exercise test; the starter fails them naming each
of its three slips; each slip alone fails only tests that name it; hand-written mutants are caught;
`trace.py` shows the first tile that differs and names the slip.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.parse
import xml.etree.ElementTree as ET
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest

from service.compute.online import SLIPS, tiled_attention

ROOT = Path(__file__).resolve().parents[2]
EXERCISE = ROOT / "exercises" / "online-softmax"
sys.path.insert(0, str(EXERCISE / "tests"))
import slips as exercise_slips  # noqa: E402

ENGINE_LOOP = """
import numpy as np
from service.compute.failure_modes import recipe_of
from service.compute.online import _head

SLIPS = {slips!r}


def online_attention(q, k, v, block_q, block_k, causal=True, record=None):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    n = len(q)
    hidden = np.triu(np.ones((n, n), dtype=bool), 1) if causal else np.zeros((n, n), dtype=bool)
    with np.errstate(all="ignore"):
        head = _head(q, k, v, hidden, 1 / np.sqrt(q.shape[1]), (block_q, block_k), recipe_of(*SLIPS), None)
    for tile in head.tiles:
        if record is not None and tile.status != "skipped":
            record(tile.query_block, tile.key_block, tile.m, tile.alpha, tile.l, tile.o_tilde)
    return head.output, head.lse
"""
SLIP_TESTS = {  # the test written for each slip
    "online_no_rescale": "test_the_sums_are_rescaled_when_the_maximum_rises",
    "online_max_not_carried": "test_the_running_maximum_is_carried_from_tile_to_tile",
    "online_diagonal_skipped": "test_the_diagonal_tile_is_computed_under_the_causal_mask",
}
WORDS = {slip: exercise_slips.SLIPS[slip][:40] for slip in SLIPS}  # how a message names each slip


def run_tests(tmp_path: Path, implementation: Path) -> dict[str, str | None]:
    """test name -> failure message (None when it passed), as `pytest exercises/online-softmax/tests`."""
    report = tmp_path / "report.xml"
    env = {
        **os.environ,
        "ONLINE_EXERCISE": str(implementation),
        "PYTHONPATH": str(ROOT),
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    }
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(EXERCISE / "tests"),
            "-q",
            "-p",
            "no:cacheprovider",
            "-o",
            "addopts=",
            f"--junitxml={report}",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    outcomes = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        failure = case.find("failure")
        outcomes[case.get("name")] = None if failure is None else failure.get("message") or ""
    assert outcomes, "no exercise test ran"
    return outcomes


def engine_file(tmp_path: Path, slips: tuple[str, ...] = ()) -> Path:
    path = tmp_path / f"engine_{'_'.join(slips) or 'right'}.py"
    path.write_text(ENGINE_LOOP.format(slips=slips))
    return path


def named_in(message: str) -> set[str]:
    return {slip for slip, words in WORDS.items() if words in message}


CASES = {
    "random": np.random.default_rng(1).normal(size=(7, 4)),
    "large logits": np.random.default_rng(2).normal(size=(6, 4)) * 40,
    "ties": np.ones((6, 4)),
    "the maximum rises in every tile": np.arange(1, 7)[:, None] * np.ones((1, 4)) * 0.7,
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "unmasked"])
def test_the_exercises_slips_and_the_engines_are_the_same_numbers(case, causal):
    x = CASES[case]
    n = len(x)
    want, want_lse = exercise_slips.plain(x, x, x, causal)
    for size in range(len(SLIPS) + 1):
        for slips in combinations(SLIPS, size):
            for block_q in range(1, n + 1):
                for block_k in range(1, n + 1):
                    mine, lse = exercise_slips.tiled(x, x, x, block_q, block_k, causal, slips)
                    engine = tiled_attention(x, 1, block_q=block_q, block_k=block_k, causal=causal, slip=slips).heads[0]
                    assert np.allclose(mine, engine.output, atol=1e-12, rtol=0), (slips, block_q, block_k)
                    assert np.array_equal(np.isneginf(lse), np.isneginf(engine.lse))
                    if not slips:
                        assert np.allclose(mine, want, atol=1e-12, rtol=0) and np.allclose(lse, want_lse, atol=1e-12)


def test_the_engines_loop_passes_every_exercise_test(tmp_path):
    outcomes = run_tests(tmp_path, engine_file(tmp_path))
    assert all(message is None for message in outcomes.values()), outcomes
    assert len(outcomes) == 8


def test_the_starter_fails_naming_each_of_its_three_slips(tmp_path):
    outcomes = run_tests(tmp_path, EXERCISE / "starter.py")
    assert all(message is not None for message in outcomes.values()), outcomes
    for slip, test in SLIP_TESTS.items():
        assert slip in named_in(outcomes[test]), (slip, outcomes[test])


@pytest.mark.parametrize("slip", SLIPS)
def test_each_slip_alone_fails_only_tests_that_name_it(tmp_path, slip):
    outcomes = run_tests(tmp_path, engine_file(tmp_path, (slip,)))
    failed = {test: message for test, message in outcomes.items() if message is not None}
    assert SLIP_TESTS[slip] in failed
    assert all(named_in(message) == {slip} for message in failed.values()), failed


MUTANTS = {  # the exercise's own right loop (slips.tiled), changed as a learner might get it almost right
    "the scale forgotten": ("scale = q.shape[0], 1 / np.sqrt(q.shape[1])", "scale = q.shape[0], 1.0"),
    "L without the maximum": ("m_new + np.log(", "np.log("),
    "the last key block left out": ("range(0, n, block_k)", "range(0, n - block_k, block_k)"),
    "the mask hides the diagonal": (
        "np.arange(c0, c1)[None, :] > np.arange",
        "np.arange(c0, c1)[None, :] >= np.arange",
    ),
    "future tiles computed": ("c0 > r1 - 1 or", "False or"),
}
AS_A_LEARNERS = (
    "\n\ndef online_attention(q, k, v, block_q, block_k, causal=True, record=None):\n"
    "    return tiled(q, k, v, block_q, block_k, causal, record=record)\n"
)


@pytest.mark.parametrize("mutant", sorted(MUTANTS))
def test_mutants_of_the_right_loop_are_caught(tmp_path, mutant):
    old, new = MUTANTS[mutant]
    source = (EXERCISE / "tests" / "slips.py").read_text()
    assert source.count(old) == 1
    right, changed = tmp_path / "right.py", tmp_path / "mutant.py"
    right.write_text(source + AS_A_LEARNERS)
    changed.write_text(source.replace(old, new) + AS_A_LEARNERS)
    assert all(message is None for message in run_tests(tmp_path, right).values())
    assert any(message is not None for message in run_tests(tmp_path, changed).values()), mutant


def trace(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(EXERCISE / "trace.py"), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


LINK = "http://127.0.0.1:9/explorables/online-softmax#t=1,0,2,1;0,1,1,0;2,1,0,1;1,1,1,1;0,2,1,3;3,0,1,1&block=2"


def test_trace_shows_the_first_tile_that_differs_beside_the_right_values(tmp_path):
    done = trace(str(EXERCISE / "starter.py"), LINK, "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    first = result["first_difference"]
    assert (first["query_block"], first["key_block"], first["what"]) == (1, 1, "skipped")  # the diagonal, skipped
    assert first["yours"] is None and len(first["correct"]["m"]) == 2
    assert "online_diagonal_skipped" in result["slips"]
    assert "#t=1,0,2,1;" in result["link"] and "compare=online_" in result["link"] and "tile=1" in result["link"]
    # with the diagonal fixed, the next slip shows at a running value, not at a tile's status
    assert "&yours=1%3Askipped" in result["link"]  # the explorable draws "you skipped it" at tile 1
    fixed = tmp_path / "fixed.py"
    fixed.write_text((EXERCISE / "starter.py").read_text().replace("c1 - 1 > r0", "c0 > r1 - 1"))
    result = json.loads(trace(str(fixed), LINK, "--json").stdout)
    first = result["first_difference"]
    assert first["what"] in ("m", "l", "o") and first["yours"] is not None
    # the link carries the learner's own values at that tile, a row per query: m, alpha, l, then o
    state = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(result["link"]).fragment))
    tile, rows = state["yours"].split(":")
    assert tile == state["tile"]
    drawn = [float(v) for row in rows.split(";") for v in row.split(",")]
    mine = first["yours"]
    expected = [x for r, m in enumerate(mine["m"]) for x in (m, mine["alpha"][r], mine["l"][r], *mine["o"][r])]
    assert len(rows.split(";")) == len(mine["m"]) and drawn == pytest.approx(expected, rel=1e-5, abs=1e-300)


def test_trace_of_a_right_loop_says_every_tile_matches(tmp_path):
    done = trace(str(engine_file(tmp_path)), LINK)
    assert done.returncode == 0 and "Every tile matches" in done.stdout, done.stdout + done.stderr


def test_trace_says_what_is_wrong_with_a_link_or_a_file(tmp_path):
    assert "is not an explorable link" in trace(str(EXERCISE / "starter.py"), "ftp://x/y").stderr
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n")
    done = trace(str(empty), LINK)
    assert done.returncode == 2 and "has no function online_attention" in done.stderr


TYPESCRIPT_READY = shutil.which("pnpm") is not None and (ROOT / "node_modules" / ".bin" / "vitest").exists()
needs_typescript = pytest.mark.skipif(
    not TYPESCRIPT_READY, reason="the TypeScript track needs Node 20, pnpm and `pnpm install` (make test runs it)"
)
# The starter's three slips and their fixes, as a learner makes them in starter.ts.
TS_FIXES = {
    "online_diagonal_skipped": [("if (causal && c1 - 1 > r0) continue;", "if (causal && c0 > r1 - 1) continue;")],
    "online_no_rescale": [
        ("l = l.map((x, a) => x + ", "l = l.map((x, a) => alpha[a] * x + "),
        ("row.map((x, f) => x + ", "row.map((x, f) => alpha[a] * x + "),
    ],
    "online_max_not_carried": [("options.record?.(i, j,", "m = mNew;\n      options.record?.(i, j,")],
}


def typescript_file(tmp_path: Path, left: tuple[str, ...]) -> Path:
    """starter.ts with every slip fixed but those `left`."""
    source = (EXERCISE / "starter.ts").read_text()
    for slip, fixes in TS_FIXES.items():
        for old, new in fixes if slip not in left else ():
            assert source.count(old) == 1, old
            source = source.replace(old, new)
    path = tmp_path / f"online_{'_'.join(left) or 'fixed'}.ts"
    path.write_text(source)
    return path


VITEST = ["pnpm", "exec", "vitest", "run", "exercises/online-softmax/tests", "--config", "vitest.exercise.config.ts"]


def run_typescript_tests(tmp_path: Path, implementation: Path) -> dict[str, str | None]:
    report = tmp_path / "report.json"
    command = VITEST
    subprocess.run(
        [*command, "--reporter=json", f"--outputFile={report}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "ONLINE_EXERCISE": str(implementation)},
        timeout=120,
    )
    outcomes = {}
    for file in json.loads(report.read_text())["testResults"]:
        assert file["assertionResults"], file.get("message")
        for test in file["assertionResults"]:
            failed = test["status"] == "failed"
            outcomes[test["title"]] = test["failureMessages"][0].split("\n")[0] if failed else None
    return outcomes


TS_SLIP_TESTS = {slip: test.removeprefix("test_").replace("_", " ") for slip, test in SLIP_TESTS.items()}


@needs_typescript
def test_the_typescript_track_passes_fixed_and_names_each_slip_left(tmp_path):
    assert all(m is None for m in run_typescript_tests(tmp_path, typescript_file(tmp_path, ())).values())
    starter = run_typescript_tests(tmp_path, EXERCISE / "starter.ts")
    assert len(starter) == 8 and all(message is not None for message in starter.values())
    for slip, title in TS_SLIP_TESTS.items():
        assert slip in named_in(starter[title]), (slip, starter[title])
        alone = run_typescript_tests(tmp_path, typescript_file(tmp_path, (slip,)))
        failed = {test: message for test, message in alone.items() if message is not None}
        assert title in failed and all(named_in(message) == {slip} for message in failed.values()), failed


@needs_typescript
def test_the_typescript_trace_says_what_the_python_trace_says():
    command = ["pnpm", "exec", "tsx", "exercises/online-softmax/trace.ts", str(EXERCISE / "starter.ts"), LINK, "--json"]
    typescript = json.loads(subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60).stdout)
    python = json.loads(trace(str(EXERCISE / "starter.py"), LINK, "--json").stdout)
    assert typescript["link"] == python["link"] and typescript["slips"] == python["slips"]
    mine, theirs = typescript["first_difference"], python["first_difference"]
    assert {k: mine[k] for k in ("query_block", "key_block", "what")} == {
        k: theirs[k] for k in ("query_block", "key_block", "what")
    }
    assert mine["correct"]["l"] == pytest.approx(theirs["correct"]["l"], abs=1e-12)


@needs_typescript
def test_the_typescript_slips_compute_the_engines_numbers():
    x = CASES["random"]
    script = (
        "import { combinations, tiled } from './exercises/online-softmax/tests/slips.ts';"
        f"const x = {json.dumps(x.tolist())};"
        "const out = [];"
        "for (const slips of combinations()) for (const b of [1, 2, 3, 7]) for (const causal of [true, false])"
        "  out.push({ slips, b, causal, output: tiled(x, x, x, b, b, causal, slips).output });"
        "console.log(JSON.stringify(out));"
    )
    done = subprocess.run(
        ["pnpm", "exec", "tsx", "--eval", script], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    runs = json.loads(done.stdout)
    assert len(runs) == 8 * 4 * 2
    for run in runs:
        engine = tiled_attention(
            x, 1, block_q=run["b"], block_k=run["b"], causal=run["causal"], slip=tuple(run["slips"])
        )
        assert np.allclose(run["output"], engine.heads[0].output, atol=1e-12, rtol=0), run["slips"]


@needs_typescript
def test_the_typescript_download_installs_offline_and_finds_the_starters_slips(client, tmp_path):
    import io
    import zipfile

    data = client.get("/api/v1/exercises/online-softmax/typescript.zip").data
    zipfile.ZipFile(io.BytesIO(data)).extractall(tmp_path)
    folder = tmp_path / "online-softmax-typescript"
    installed = subprocess.run(
        ["pnpm", "install", "--offline", "--frozen-lockfile"], cwd=folder, capture_output=True, text=True, timeout=120
    )
    if installed.returncode:
        pytest.skip(f"pnpm could not install from its store offline: {installed.stderr[-300:]}")
    command = VITEST
    plain = {**os.environ, "NO_COLOR": "1", "FORCE_COLOR": "0", "COLUMNS": "400"}
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=120, env=plain)
    said = done.stdout + done.stderr  # vitest writes each failure's message to stderr
    assert done.returncode == 1 and "8 failed" in said, said[-1500:]
    assert all(words in said for words in WORDS.values()), said[-3000:]  # each slip named, as the lesson promises
