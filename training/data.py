"""Training data: windows of real text and random sequences typed twice, half and half.

Text: the reStructuredText sources of Python's documentation from Debian's `python3.11-doc`
(PSF licence), read in sorted order so every machine sees the same bytes. Random sequences:
printable ASCII (what a learner types): a random sequence of 8 to 64 bytes repeated to fill the
context. The period varies, so only the content finds the earlier copy (with a fixed period,
RoPE lets a single head attend "63 back" and fake an induction head); predicting the repeats
is what an induction head is for.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from service.models.byte_model import PRINTABLE

TEXT_ROOT = Path("/usr/share/doc/python3.11-doc/html/_sources")


def text_files(root: Path = TEXT_ROOT) -> list[Path]:
    files = sorted(root.resolve().rglob("*.rst.txt"), key=lambda p: p.relative_to(root.resolve()).as_posix())
    if not files:
        raise SystemExit(f"no documentation sources under {root}: apt-get install -y python3.11-doc")
    return files


def corpus(root: Path = TEXT_ROOT) -> np.ndarray:
    """Every source file's bytes, concatenated in sorted order: [bytes] uint8."""
    parts = [path.read_bytes() for path in text_files(root)]
    return np.frombuffer(b"\n\n".join(parts), dtype=np.uint8)


def repeating_rows(rng: np.random.Generator, count: int, context: int, shortest: int = 8) -> np.ndarray:
    """Training rows: a random printable sequence of `shortest` .. context/2 bytes, repeated to fill
    the context (every byte after the first period is predictable, by content only)."""
    periods = rng.integers(shortest, context // 2 + 1, size=count)
    seeds = rng.choice(PRINTABLE, size=(count, context // 2))
    return np.stack([np.resize(seed[:period], context) for seed, period in zip(seeds, periods, strict=True)])


def batch(rng: np.random.Generator, text: np.ndarray, size: int, context: int) -> np.ndarray:
    """Half text windows, half repeated random sequences: [size, context] uint8."""
    starts = rng.integers(0, len(text) - context, size=size // 2)
    windows = np.stack([text[s : s + context] for s in starts])
    return np.concatenate([windows, repeating_rows(rng, size - size // 2, context)])
