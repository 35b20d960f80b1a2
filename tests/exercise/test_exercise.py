"""The learner-facing exercise tests, run as a learner would, against known implementations.

The reference passes everything; the starter fails exactly the three tests of its three bugs;
each known mistake fails with a message that names it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXERCISE = ROOT / "exercises" / "multi-head-attention"
IMPLEMENTATIONS = Path(__file__).resolve().parent / "implementations"


def run_exercise_tests(tmp_path, implementation: Path, **env) -> dict[str, str | None]:
    """test name -> failure message (None when it passed, 'skipped' when skipped)."""
    report = tmp_path / "report.xml"
    environment = {
        **os.environ,
        "MHA_EXERCISE": str(implementation),
        **env,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(IMPLEMENTATIONS)]),
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
            f"--junitxml={report}",
            "-o",
            "addopts=",
        ],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
    )
    outcomes: dict[str, str | None] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        failure = case.find("failure")
        if failure is None:
            failure = case.find("error")
        outcomes[case.get("name")] = (
            (failure.get("message") or "")
            if failure is not None
            else "skipped"
            if case.find("skipped") is not None
            else None
        )
    assert outcomes, "no exercise test ran"
    return outcomes


def failures(outcomes):
    return {name: message for name, message in outcomes.items() if message not in (None, "skipped")}


def test_the_reference_passes_every_exercise_test(tmp_path):
    outcomes = run_exercise_tests(tmp_path, IMPLEMENTATIONS / "reference_adapter.py")
    assert failures(outcomes) == {}
    assert outcomes["test_the_workbench_case_end_to_end"] is None  # ran, not skipped


def test_the_starter_fails_naming_exactly_its_three_bugs(tmp_path):
    failed = failures(run_exercise_tests(tmp_path, EXERCISE / "starter.py"))
    assert set(failed) == {
        "test_each_head_reads_its_own_contiguous_slice",
        "test_scores_are_scaled_by_sqrt_d_head",
        "test_mask_hides_the_future_before_the_softmax",
    }
    assert "interleaved" in failed["test_each_head_reads_its_own_contiguous_slice"]
    assert (
        "head 2 received features [2, 4]; the split must be contiguous: [3, 4]"
        in failed["test_each_head_reads_its_own_contiguous_slice"]
    )
    assert "not divided by sqrt(d_head)" in failed["test_scores_are_scaled_by_sqrt_d_head"]
    assert "applied after the softmax" in failed["test_mask_hides_the_future_before_the_softmax"]


MISTAKE_MESSAGES = {
    "interleaved_split": "interleaved",
    "reuse_first_slice": "the same as head 1",
    "no_scaling": "not divided by sqrt(d_head)",
    "scale_by_d_model": "divided by sqrt(d_model)",
    "mask_after_softmax": "applied after the softmax",
    "swapped_head_order": "reverse order",
    "no_output_projection": "output projection was not applied",
    "no_mask": "no causal mask",
    "diagonal_masked": "diagonal is masked too",
    "zero_mask": "set to 0 instead of -inf",
    "softmax_wrong_axis": "ran over the queries",
    "weights_transposed": "transposed",
}


@pytest.mark.parametrize("mistake, phrase", sorted(MISTAKE_MESSAGES.items()))
def test_each_mistake_fails_with_a_message_that_names_it(tmp_path, mistake, phrase):
    failed = failures(run_exercise_tests(tmp_path, IMPLEMENTATIONS / "with_mistake.py", MHA_MISTAKE=mistake))
    assert failed, f"{mistake} passed every exercise test"
    assert any(phrase in message for message in failed.values()), failed
    others = {m: p for m, p in MISTAKE_MESSAGES.items() if m != mistake and p not in MISTAKE_MESSAGES[mistake]}
    named_others = [m for m, p in others.items() if any(p in message for message in failed.values())]
    # A transposed matrix also fails the "rows sum to 1" check, which reports the wrong axis.
    assert set(named_others) <= {"softmax_wrong_axis"} if mistake == "weights_transposed" else not named_others


def test_wrong_output_shapes_are_named(tmp_path):
    failed = failures(run_exercise_tests(tmp_path, IMPLEMENTATIONS / "wrong_shapes.py"))
    assert "wrong output shape: weights has shape (3, 2, 3)" in failed["test_output_shapes"]


def test_an_unexplained_head_count_error_is_caught(tmp_path):
    failed = failures(run_exercise_tests(tmp_path, IMPLEMENTATIONS / "silent_error.py"))
    assert "naming both numbers" in failed["test_incompatible_head_count_explains_itself"]


# The list: the lesson's failure modes and the common slips, each written by hand as a
# learner would (implementations/handwritten.py), so a masked diagonal really produces NaN.
HANDWRITTEN = {
    "diagonal_masked": "diagonal is masked too",
    "scale_by_d_model": "divided by sqrt(d_model)",
    "softmax_wrong_axis": "ran over the queries",
    "swapped_head_order": "reverse order",
    "no_mask": "no causal mask",
    "mask_after_softmax": "applied after the softmax",
    "interleaved_split": "interleaved",
    "reuse_first_slice": "the same as head 1",
    "no_scaling": "not divided by sqrt(d_head)",
    "no_output_projection": "output projection was not applied",
}


def test_a_handwritten_correct_implementation_passes(tmp_path):
    outcomes = run_exercise_tests(tmp_path, IMPLEMENTATIONS / "handwritten.py", MHA_MISTAKE="")
    assert failures(outcomes) == {}
    assert outcomes["test_the_workbench_case_end_to_end"] is None


@pytest.mark.parametrize("mistake, phrase", sorted(HANDWRITTEN.items()))
def test_each_handwritten_slip_is_named_in_every_failure_it_causes(tmp_path, mistake, phrase):
    failed = failures(run_exercise_tests(tmp_path, IMPLEMENTATIONS / "handwritten.py", MHA_MISTAKE=mistake))
    assert failed, f"{mistake} passed every exercise test"
    assert any(phrase in message for message in failed.values()), failed
    unnamed = {t: m for t, m in failed.items() if not any(p in m for p in HANDWRITTEN.values())}
    assert not unnamed, f"failures that name no mistake: {unnamed}"


@pytest.mark.parametrize("float_errors", ["", "raise"])
def test_a_masked_diagonal_is_named_whether_it_yields_nan_or_raises(tmp_path, float_errors):
    report = tmp_path / "out"
    report.mkdir()
    failed = failures(
        run_exercise_tests(
            report, IMPLEMENTATIONS / "handwritten.py", MHA_MISTAKE="diagonal_masked", MHA_FLOAT_ERRORS=float_errors
        )
    )
    assert failed and all("diagonal is masked too" in m for m in failed.values()), failed
    assert not any("RuntimeWarning" in m for m in failed.values())


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory):
    """A virtualenv holding only numpy and pytest, as a learner's own Python might."""
    venv = tmp_path_factory.mktemp("learner") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    python = venv / "bin" / "python"
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "numpy", "pytest"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if installed.returncode:
        pytest.skip(f"could not install numpy and pytest into a fresh virtualenv: {installed.stderr[-300:]}")
    return python


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
    assert (
        "interleaved" in starter.stdout and "sqrt(d_head)" in starter.stdout and "after the softmax" in starter.stdout
    )

    correct = bare_run(bare_python, IMPLEMENTATIONS / "handwritten.py")
    assert correct.returncode == 0, correct.stdout
    assert "9 passed" in correct.stdout
