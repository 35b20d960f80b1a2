"""Load the implementation under test: the file named by MHA_EXERCISE, else ../starter.py.

The exercise's folder (learner.py, the starter) and your file's own folder are importable."""

import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from learner import LearnerError, load  # noqa: E402

IMPLEMENTATION = pytest.StashKey()


def pytest_addoption(parser):
    parser.addoption("--lang", help="the messages' language: en, es or zh-CN (else MHA_LANG, else LANG)")


def pytest_configure(config):
    if config.getoption("--lang"):
        os.environ["MHA_LANG"] = config.getoption("--lang")


_FAILED: list[str] = []


def implementation_path() -> Path:
    return Path(os.environ.get("MHA_EXERCISE") or HERE.parent / "starter.py")


def pytest_sessionstart(session):
    try:
        session.config.stash[IMPLEMENTATION] = load(implementation_path())
    except LearnerError as exc:
        pytest.exit(str(exc), returncode=1)


@pytest.fixture(scope="session")
def mha(request):
    return request.config.stash[IMPLEMENTATION]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and report.failed:
        _FAILED.append(item.name)


@pytest.fixture
def failed_so_far():
    """Names of the tests that failed before this one (the end-to-end check waits for them)."""
    return list(_FAILED)
