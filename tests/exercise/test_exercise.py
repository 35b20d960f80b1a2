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
        "head 2 received features [1, 3]; the split must be contiguous: [2, 3]"
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
