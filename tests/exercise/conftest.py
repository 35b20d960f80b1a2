"""A learner's own Python, made once for the whole run: a virtualenv holding numpy alone, and a copy
of it with pytest too. Parallel workers share them (the first to ask builds, behind a file lock):
installing numpy into a fresh virtualenv took ten to thirty seconds of each worker's time."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from filelock import FileLock


def _install(python: Path, *packages: str) -> None:
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *packages],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if installed.returncode:
        pytest.skip(f"could not install {' and '.join(packages)} into a fresh virtualenv: {installed.stderr[-300:]}")


def _shared(tmp_path_factory, name: str, build) -> Path:
    """`build(where)` once per run, whichever worker asks first; the python it leaves."""
    root = tmp_path_factory.getbasetemp().parent  # shared by every xdist worker of this run
    where = root / name
    with FileLock(str(root / f"{name}.lock")):
        python = where / "bin" / "python"
        if not (where / "ready").exists():
            shutil.rmtree(where, ignore_errors=True)
            build(where)
            (where / "ready").touch()
    return python


def _numpy_venv(where: Path) -> None:
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, capture_output=True)
    _install(where / "bin" / "python", "numpy")


@pytest.fixture(scope="session")
def numpy_only(tmp_path_factory) -> Path:
    """A virtualenv holding numpy and nothing else, as a learner's own Python might."""
    return _shared(tmp_path_factory, "venv-numpy", _numpy_venv)


@pytest.fixture(scope="session")
def bare_python(tmp_path_factory, numpy_only) -> Path:
    """A virtualenv holding only numpy and pytest (numpy's, copied, with pytest installed)."""

    def build(where: Path) -> None:
        shutil.copytree(numpy_only.parents[1], where, symlinks=True, ignore=shutil.ignore_patterns("ready"))
        _install(where / "bin" / "python", "pytest")

    return _shared(tmp_path_factory, "venv-numpy-pytest", build)
