"""The online-softmax exercise's checker over HTTP: each slip and each combination of them named, against
the exercise's own loop (exercises/online-softmax/tests/slips.py) rather than the engine that answers."""

import io
import subprocess
import sys
import zipfile
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import select

from service.api.exercises import BUNDLES
from service.db.tables import ExerciseCheck

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "exercises" / "online-softmax" / "tests"))
import slips as exercise  # noqa: E402

CHECK = "/api/v1/exercises/online-softmax/check"
X = np.random.default_rng(5).normal(size=(6, 4)).round(3)
CASE = {"tokens": X.tolist(), "causal": True, "block_q": 2, "block_k": 2}


def output_of(slips=(), x=X, block=2, causal=True):
    out, lse = exercise.tiled(x, x, x, block, block, causal, slips)
    return {"output": np.where(np.isfinite(out), out, np.nan).tolist(), "lse": lse.tolist()}


def nulls(output):
    """JSON has no NaN: null stands for it."""
    return {
        part: [
            [None if isinstance(v, float) and v != v else v for v in row] if isinstance(row, list) else row
            for row in values
        ]
        for part, values in output.items()
    }


def test_a_right_loop_is_correct(client):
    result = client.post(CHECK, json={"case": CASE, "output": output_of()}).json
    assert (result["correct"], result["mistakes"], result["diagnosis"]) == (True, [], None)


@pytest.mark.parametrize("slips", [c for size in (1, 2, 3) for c in combinations(exercise.SLIPS, size)], ids=str)
def test_every_slip_and_combination_is_named(client, slips):
    body = {"case": CASE, "output": {"output": output_of(slips)["output"]}}
    result = client.post(CHECK, json={"case": CASE, "output": nulls(body["output"])}).json
    assert result["correct"] is False
    assert set(result["mistakes"]) == set(slips), result
    assert result["diagnosis"] == (slips[0] if len(slips) == 1 else None)


def test_the_starters_output_names_its_slips(client):
    namespace: dict = {}
    exec((ROOT / "exercises" / "online-softmax" / "starter.py").read_text(), namespace)  # the learner's starter, run
    with np.errstate(all="ignore"):
        out, lse = namespace["online_attention"](X, X, X, 2, 2, causal=True)
    body = {"case": CASE, "output": nulls({"output": out.tolist()})}
    result = client.post(CHECK, json=body).json
    assert "online_diagonal_skipped" in result["mistakes"] and "NaN" in result["message"]


def test_a_right_output_with_a_wrong_l_is_not_correct_and_names_no_slip(client):
    # one tile holding every score: every slip's output is right here too, so none is named
    right = output_of(block=6, causal=False)
    body = {
        "case": {**CASE, "block_q": 6, "block_k": 6, "causal": False},
        "output": {"output": right["output"], "lse": [v + 0.5 for v in right["lse"]]},
    }
    result = client.post(CHECK, json=body).json
    assert (result["correct"], result["mistakes"]) == (False, []) and result["max_abs_error"] == pytest.approx(0.5)


@pytest.mark.parametrize(
    "case, output, field",
    [
        ({**CASE, "block_q": 0}, {"output": [[0] * 4] * 6}, "case.block_q"),
        ({**CASE, "block_k": 33}, {"output": [[0] * 4] * 6}, "case.block_k"),
        (CASE, {"output": [[0] * 3] * 6}, "output.output"),
        (CASE, {"output": [[0] * 4] * 6, "lse": [0] * 5}, "output.lse"),
        (CASE, {"lse": [0] * 6}, "output.output"),
    ],
)
def test_malformed_checks_are_422_naming_the_field(client, case, output, field):
    response = client.post(CHECK, json={"case": case, "output": output})
    assert response.status_code == 422, response.json
    assert field in response.json["errors"]


def test_oversized_cases_are_413(client):
    body = {"case": {"tokens": [[1.0] * 4] * 100, "block_q": 2, "block_k": 2}, "output": {"output": [[0.0] * 4] * 100}}
    assert client.post(CHECK, json=body).status_code == 413


@pytest.mark.databases
def test_a_platform_learners_check_is_kept_under_its_lesson(client, db, acme):
    assert client.post(
        CHECK, json={"case": CASE, "output": output_of(("online_no_rescale",)), "learner": "ada"}, headers=acme
    ).json["recorded"]
    with db.read() as s:
        rows = s.scalars(select(ExerciseCheck)).all()
    assert [(r.learner, r.lesson, r.correct, r.diagnosis) for r in rows] == [
        ("ada", "online-softmax", False, "online_no_rescale")
    ]


def test_the_mistakes_are_the_three_slips(client):
    assert sorted(client.get("/api/v1/exercises/online-softmax/mistakes").json["mistakes"]) == sorted(exercise.SLIPS)


def test_the_python_bundle_holds_the_tracked_files_and_runs_with_numpy_and_pytest(client, tmp_path):
    response = client.get("/api/v1/exercises/online-softmax/python.zip")
    assert response.status_code == 200
    with zipfile.ZipFile(io.BytesIO(response.data)) as archive:
        names = [n.removeprefix("online-softmax-python/") for n in archive.namelist()]
        archive.extractall(tmp_path)
    files = BUNDLES["online-softmax"]["python"]
    assert names == list(files)
    tracked = subprocess.run(["git", "ls-files", *files], cwd=ROOT, capture_output=True, text=True).stdout.split()
    assert sorted(tracked) == sorted(files)  # nothing in a download is untracked
    folder = tmp_path / "online-softmax-python" / "exercises" / "online-softmax"
    alone = {"PATH": "/usr/bin:/bin", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}  # nothing of this repository's
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider"],
        cwd=folder,
        env=alone,
        capture_output=True,
        text=True,
    )
    assert "8 failed" in done.stdout, done.stdout[-2000:] + done.stderr  # the starter's slips, found in the download
    typescript = client.get("/api/v1/exercises/online-softmax/typescript.zip")
    with zipfile.ZipFile(io.BytesIO(typescript.data)) as archive:
        names = [n.removeprefix("online-softmax-typescript/") for n in archive.namelist()]
    assert names == list(BUNDLES["online-softmax"]["typescript"]) and "exercises/online-softmax/starter.ts" in names
    assert client.get("/api/v1/exercises/online-softmax/starter.py").status_code == 200
