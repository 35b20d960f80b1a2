"""Fault tests: slow, run by .ci/run (WORKBENCH_TEST_SLOW=1)."""

import os

import pytest


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/faults" in str(item.fspath):
            item.add_marker(pytest.mark.slow)
            if not os.environ.get("WORKBENCH_TEST_SLOW"):
                item.add_marker(pytest.mark.skip(reason="slow fault tests run in .ci/run (set WORKBENCH_TEST_SLOW=1)"))
