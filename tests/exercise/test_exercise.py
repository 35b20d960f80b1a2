"""The learner-facing exercise tests, in Python and TypeScript, run as a learner would, against
known implementations.

The reference passes everything; each starter fails exactly the three tests of its three bugs;
each known mistake, written by hand in each language, fails naming the same mistake in both;
every unusable result gets a message, never a traceback.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from .slips import HANDWRITTEN_SLIPS

ROOT = Path(__file__).resolve().parents[2]
EXERCISE = ROOT / "exercises" / "multi-head-attention"
IMPLEMENTATIONS = Path(__file__).resolve().parent / "implementations"
SEED_COMMAND = [
    "pnpm",
    "exec",
    "vitest",
    "run",
    "exercises/multi-head-attention/tests",
    "--config",
    "vitest.exercise.config.ts",
]
TYPESCRIPT_READY = shutil.which("pnpm") is not None and (ROOT / "node_modules" / ".bin" / "vitest").exists()
needs_typescript = pytest.mark.skipif(
    not TYPESCRIPT_READY, reason="the TypeScript track needs Node 20, pnpm and `pnpm install` (make test runs it)"
)
LANGUAGES = ["python", pytest.param("typescript", marks=needs_typescript)]
SUFFIX = {"python": ".py", "typescript": ".ts"}
STARTER_BUGS = {"interleaved_split", "no_scaling", "mask_after_softmax"}
ENGLISH = {"MHA_LANG": "en"}  # the messages' language, whatever this machine's locale; a test may change it
# A learner's venv (make run's) has pytest alone; this one has the dev extra's plugins (schemathesis,
# hypothesis, playwright), which took 3 s of every run of the learner's tests to load and none uses.
AS_A_LEARNERS = {**ENGLISH, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}


def run_python_tests(tmp_path, implementation: Path, **env) -> dict[str, str | None]:
    """test name -> failure message (None when it passed, 'skipped' when skipped)."""
    report = tmp_path / "report.xml"
    flags = [f"--lang={env.pop('PYTEST_LANG')}"] if "PYTEST_LANG" in env else []
    environment = {**os.environ, **AS_A_LEARNERS, "MHA_EXERCISE": str(implementation), **env, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "pytest", str(EXERCISE / "tests"), "-q", "-p", "no:cacheprovider", *flags]
    subprocess.run(
        [*command, f"--junitxml={report}", "-o", "addopts="], cwd=ROOT, env=environment, capture_output=True, text=True
    )
    outcomes: dict[str, str | None] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        failure = case.find("failure")
        if failure is None:
            failure = case.find("error")
        skipped = case.find("skipped") is not None
        outcomes[case.get("name")] = (
            (failure.get("message") or "") if failure is not None else "skipped" if skipped else None
        )
    assert outcomes, "no exercise test ran"
    return outcomes


def run_typescript_tests(tmp_path, implementation: Path, **env) -> dict[str, str | None]:
    """The same for the TypeScript tests (vitest's JSON report)."""
    report = tmp_path / "report.json"
    environment = {**os.environ, **ENGLISH, "MHA_EXERCISE": str(implementation), **env}
    subprocess.run(
        [*SEED_COMMAND, "--reporter=json", f"--outputFile={report}"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    results = json.loads(report.read_text())["testResults"]
    outcomes: dict[str, str | None] = {}
    for file in results:
        if not file["assertionResults"]:  # the file itself failed to load
            outcomes["(loading the tests)"] = file.get("message", "")
        for test in file["assertionResults"]:
            status = test["status"]
            # the message's first line is what the learner reads (the JSON report adds the stack)
            outcomes[test["title"]] = (
                test["failureMessages"][0].split("\n")[0]
                if status == "failed"
                else "skipped"
                if status != "passed"
                else None
            )
    assert outcomes, "no exercise test ran"
    return outcomes


def run_as_learner(command: list[str], implementation: Path | str | None = None) -> subprocess.CompletedProcess:
    """`command` from the repository root, as a learner types it (MHA_EXERCISE names their file)."""
    env = {**os.environ, **AS_A_LEARNERS, **({"MHA_EXERCISE": str(implementation)} if implementation else {})}
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)


_RUNS: dict[tuple, dict[str, str | None]] = {}


def run_tests(language: str, tmp_path, implementation: Path, **env) -> dict[str, str | None]:
    """The learner's tests in `language` against `implementation`, each run once per worker (two
    tests reading the same run, such as a slip's messages in each language, share it)."""
    key = (language, str(implementation), tuple(sorted(env.items())))
    if key not in _RUNS:
        run = run_python_tests if language == "python" else run_typescript_tests
        _RUNS[key] = run(tmp_path, implementation, **env)
    return dict(_RUNS[key])


def failures(outcomes):
    return {name: message for name, message in outcomes.items() if message not in (None, "skipped")}


def mistakes_named(messages) -> set[str]:
    return {m for message in messages for m in re.findall(r"\(mistake: (\w+)\)", message)}


def handwritten(language: str) -> Path:
    return IMPLEMENTATIONS / f"handwritten{SUFFIX[language]}"


def test_the_reference_passes_every_exercise_test(tmp_path):
    outcomes = run_python_tests(tmp_path, IMPLEMENTATIONS / "reference_adapter.py")
    assert failures(outcomes) == {}
    assert outcomes["test_the_workbench_case_end_to_end"] is None  # ran, not skipped


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_starter_fails_naming_exactly_its_three_bugs(tmp_path, language):
    failed = failures(run_tests(language, tmp_path, EXERCISE / f"starter{SUFFIX[language]}"))
    assert len(failed) == 3, failed
    # each failure names one mistake, and together they are the three
    assert sorted(sorted(mistakes_named([message])) for message in failed.values()) == [
        [m] for m in sorted(STARTER_BUGS)
    ]
    split = next(m for m in failed.values() if "interleaved_split" in m)
    assert "head 2 received features [2, 4]; the split must be contiguous: [3, 4]" in split


def catalog(lang: str) -> dict[str, str]:
    name = "messages.json" if lang == "en" else f"messages.{lang}.json"
    return json.loads((EXERCISE / "tests" / name).read_text(encoding="utf-8"))


def fixed_text(template: str) -> str:
    """A message's words before its first blank: what it says whatever the numbers."""
    return template.split("{", 1)[0]


@pytest.mark.parametrize("lang", ["es", "zh-CN"])
def test_every_message_is_translated_with_the_same_blanks_and_mistake_ids(lang):
    english, translated = catalog("en"), catalog(lang)
    assert set(translated) == set(english)
    for key, text in ((k, v) for k, v in english.items() if k != "_about"):  # _about describes the file
        assert set(re.findall(r"\{(\w+)\}", translated[key])) == set(re.findall(r"\{(\w+)\}", text)), key
        assert re.findall(r"\(mistake: \w+\)", translated[key]) == re.findall(r"\(mistake: \w+\)", text), key
        assert translated[key] != text, f"{key} is not translated"


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize(
    "route", [{"MHA_LANG": "es"}, {"MHA_LANG": "", "LC_ALL": "", "LC_MESSAGES": "", "LANG": "es_ES.UTF-8"}]
)
def test_the_starter_fails_in_spanish_with_its_three_messages_in_spanish(tmp_path, language, route):
    failed = failures(run_tests(language, tmp_path, EXERCISE / f"starter{SUFFIX[language]}", **route))
    assert mistakes_named(failed.values()) == STARTER_BUGS and len(failed) == 3, failed
    spanish, english = catalog("es"), catalog("en")
    for message in failed.values():
        (mistake,) = mistakes_named([message])
        assert fixed_text(spanish[mistake]) in message and fixed_text(english[mistake]) not in message, message
    names = set(run_tests(language, tmp_path, EXERCISE / f"starter{SUFFIX[language]}"))
    assert set(failed) <= names  # the tests' own names stay English


def test_pytest_takes_the_language_as_a_flag(tmp_path):
    failed = failures(run_python_tests(tmp_path, EXERCISE / "starter.py", PYTEST_LANG="zh-CN"))
    split = next(m for m in failed.values() if "interleaved_split" in m)
    assert fixed_text(catalog("zh-CN")["interleaved_split"]) in split


@needs_typescript
def test_the_seeds_command_fails_the_starter_with_its_three_bugs_and_switches_files():
    starter = run_as_learner(SEED_COMMAND)
    text = re.sub(r"\x1b\[[0-9;]*m", "", starter.stdout + starter.stderr)
    assert starter.returncode == 1
    assert re.search(r"Tests\s+3 failed \| 5 passed \| 1 skipped", text), text
    assert mistakes_named([text]) == STARTER_BUGS
    assert (
        not re.search(r"^\s+at ", text, re.M)
        and "❯ exercises/multi-head-attention/tests/multi-head-attention.test.ts:" not in text
    )
    correct = run_as_learner(SEED_COMMAND, handwritten("typescript").relative_to(ROOT))
    assert correct.returncode == 0, correct.stdout
    assert re.search(r"Tests\s+9 passed", re.sub(r"\x1b\[[0-9;]*m", "", correct.stdout))


@pytest.mark.parametrize("mistake", sorted(set(HANDWRITTEN_SLIPS) | {"zero_mask", "weights_transposed"}))
def test_each_mistake_computed_by_the_engine_fails_naming_it(tmp_path, mistake):
    failed = failures(run_python_tests(tmp_path, IMPLEMENTATIONS / "with_mistake.py", MHA_MISTAKE=mistake))
    named = mistakes_named(failed.values())
    assert mistake in named, failed
    # A transposed matrix also fails the "rows sum to 1" check, which reports the wrong axis.
    assert named - {mistake} <= ({"softmax_wrong_axis"} if mistake == "weights_transposed" else set()), failed


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_handwritten_correct_implementation_passes(tmp_path, language):
    outcomes = run_tests(language, tmp_path, handwritten(language), MHA_MISTAKE="")
    assert failures(outcomes) == {}
    assert len(outcomes) == 9 and all(message is None for message in outcomes.values())


@pytest.mark.parametrize("mistake", HANDWRITTEN_SLIPS)
@pytest.mark.parametrize("language", LANGUAGES)
def test_each_handwritten_slip_is_named_in_every_failure_it_causes(tmp_path, language, mistake):
    failed = failures(run_tests(language, tmp_path, handwritten(language), MHA_MISTAKE=mistake))
    assert failed, f"{mistake} passed every exercise test"
    assert mistake in mistakes_named(failed.values()), failed
    unnamed = {t: m for t, m in failed.items() if not mistakes_named([m])}
    assert not unnamed, f"failures that name no mistake: {unnamed}"


@needs_typescript
@pytest.mark.parametrize("mistake", HANDWRITTEN_SLIPS)
def test_both_languages_name_each_slip_in_the_same_words(tmp_path, mistake):
    (tmp_path / "py").mkdir()
    (tmp_path / "ts").mkdir()
    python = failures(run_tests("python", tmp_path / "py", handwritten("python"), MHA_MISTAKE=mistake))
    typescript = failures(run_tests("typescript", tmp_path / "ts", handwritten("typescript"), MHA_MISTAKE=mistake))
    assert mistakes_named(python.values()) == mistakes_named(typescript.values())
    # The words are the same: each message's text up to its first number.
    assert opening_words(python.values()) == opening_words(typescript.values())


def opening_words(messages) -> list[str]:
    return sorted(
        re.split(r"[-\d\[]", m.removeprefix("Failed: ").removeprefix("AssertionError: "), maxsplit=1)[0]
        for m in messages
    )


# MHA_BROKEN -> what the message must say, per language.
BROKEN = {
    "raises": ("raised KeyError: 'head_outputs' (line", "raised TypeError: Cannot read properties of undefined"),
    "returns_list": ("must return a dict of weights", "must return an object of weights"),
    "missing_part": ("the result is missing head_outputs", "the result is missing headOutputs"),
    "missing_head_axis": ("weights has shape [3, 3]; it must be [H][n][n] = [2, 3, 3]", "the head axis is missing"),
    "heads_last": ("the head axis comes first", "the head axis comes first"),
    "transposed": (
        "concatenated has shape [4, 3]; it must be [n][d_model] = [3, 4]",
        "the axes are the other way round",
    ),
    "wrong_n": ("one row per token: 3 here", "one row per token: 3 here"),
    "strings": ("the result's weights is not an array of numbers", "string half is not a number"),
    "ragged": ("the result's concatenated is not an array of numbers", "its rows have different lengths"),
    "nan": ("output contains NaN at query 1, feature 1", "output contains NaN at query 1, feature 1"),
}


@pytest.mark.parametrize("broken", sorted(BROKEN))
@pytest.mark.parametrize("language", LANGUAGES)
def test_every_unusable_result_gets_a_message_not_a_traceback(tmp_path, language, broken):
    failed = failures(run_tests(language, tmp_path, IMPLEMENTATIONS / f"broken{SUFFIX[language]}", MHA_BROKEN=broken))
    phrase = BROKEN[broken][language == "typescript"]
    assert failed and any(phrase in message for message in failed.values()), failed
    assert not any("Traceback" in m or 'File "' in m for m in failed.values()), failed


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_file_without_the_function_says_what_it_looked_for(tmp_path, language):
    implementation = IMPLEMENTATIONS / f"no_function{SUFFIX[language]}"
    if language == "python":
        command = [sys.executable, "-m", "pytest", str(EXERCISE / "tests"), "-p", "no:cacheprovider"]
    else:
        command = SEED_COMMAND
    done = run_as_learner(command, implementation)
    text = done.stdout + done.stderr
    assert done.returncode != 0
    wanted = "defines no multi_head_attention" if language == "python" else "defines no exported multiHeadAttention"
    assert wanted in text and ("multihead_attention" in text or "multiHeadAttn" in text), text
    assert "Traceback" not in text


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_helper_module_beside_the_learners_file_can_be_imported(tmp_path, language):
    outcomes = run_tests(language, tmp_path, IMPLEMENTATIONS / "with_helper" / f"my_attention{SUFFIX[language]}")
    assert failures(outcomes) == {}


def test_an_unexplained_head_count_error_is_caught(tmp_path):
    failed = failures(run_python_tests(tmp_path, IMPLEMENTATIONS / "silent_error.py"))
    assert "naming both numbers" in failed["test_incompatible_head_count_explains_itself"]


@pytest.mark.parametrize("float_errors", ["", "raise"])
def test_a_masked_diagonal_is_named_whether_it_yields_nan_or_raises(tmp_path, float_errors):
    failed = failures(
        run_python_tests(tmp_path, handwritten("python"), MHA_MISTAKE="diagonal_masked", MHA_FLOAT_ERRORS=float_errors)
    )
    assert failed and all(("diagonal is masked too" in m or "is the diagonal masked too" in m) for m in failed.values())
    assert not any("RuntimeWarning" in m for m in failed.values())


def bare_run(python, implementation: Path | None) -> subprocess.CompletedProcess:
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp")}
    if implementation is not None:
        env["MHA_EXERCISE"] = str(implementation)
    return subprocess.run(
        [str(python), "-m", "pytest", "exercises/multi-head-attention/tests", "-p", "no:cacheprovider", "-rf"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_readme_command_in_a_python_with_only_numpy_and_pytest(bare_python):
    starter = bare_run(bare_python, None)
    assert "Unknown config option" not in starter.stdout + starter.stderr
    failed = sorted(
        line.split("::")[1].split(" ")[0] for line in starter.stdout.splitlines() if line.startswith("FAILED")
    )
    assert failed == [
        "test_each_head_reads_its_own_contiguous_slice",
        "test_mask_hides_the_future_before_the_softmax",
        "test_scores_are_scaled_by_sqrt_d_head",
    ], starter.stdout
    assert mistakes_named([starter.stdout]) == STARTER_BUGS

    correct = bare_run(bare_python, handwritten("python"))
    assert correct.returncode == 0, correct.stdout
    assert "9 passed" in correct.stdout
