"""Load the implementation under test: the file named by ONLINE_EXERCISE, else ../starter.py."""

import importlib.util
import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def implementation_path() -> Path:
    return Path(os.environ.get("ONLINE_EXERCISE") or HERE.parent / "starter.py")


def load(path: Path):
    """The file's `online_attention`, or a message that says what is missing."""
    if not path.is_file():
        pytest.exit(f"{path} does not exist: name your file in ONLINE_EXERCISE, or edit starter.py", returncode=1)
    sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location("learners_online_softmax", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the learner's file: any error is theirs to read
        pytest.exit(f"{path.name} does not import: {type(exc).__name__}: {exc}", returncode=1)
    if not callable(getattr(module, "online_attention", None)):
        pytest.exit(f"{path.name} has no function online_attention(q, k, v, block_q, block_k, causal)", returncode=1)
    return module.online_attention


@pytest.fixture(scope="session")
def online_attention():
    return load(implementation_path())
