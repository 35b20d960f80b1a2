"""Load the implementation under test: the file named by MHA_EXERCISE, else ../starter.py."""

import importlib.util
import os
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def load_implementation():
    path = Path(os.environ.get("MHA_EXERCISE") or HERE.parent / "starter.py").resolve()
    spec = importlib.util.spec_from_file_location("learner_mha", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not hasattr(module, "multi_head_attention"):
        raise AssertionError(f"{path} defines no multi_head_attention(tokens, heads, causal=True)")
    return module.multi_head_attention


@pytest.fixture(scope="session")
def mha():
    return load_implementation()


_FAILED: list[str] = []


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
