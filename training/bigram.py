"""The bigram table of the byte model's training text (speculative decoding's cheapest draft): how often
each byte follows each other in the documentation sources `training/data.py` reads, counted once and
kept beside the model as content/models/<id>/bigram.json (rows of [next byte, count], the zeros left out).

    python -m training.bigram content/models/bytes-2l-attn
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from .data import TEXT_ROOT, corpus


def counts(text: np.ndarray) -> np.ndarray:
    """[256, 256]: counts[a, b] = how often byte b follows byte a."""
    table = np.zeros((256, 256), dtype=np.int64)
    np.add.at(table, (text[:-1], text[1:]), 1)
    return table


def main(directory: str) -> None:
    table = counts(corpus())
    rows = [[[int(b), int(c)] for b, c in enumerate(row) if c] for row in table]
    source = f"{TEXT_ROOT} (Debian python3.11-doc), {int(table.sum()):,} byte pairs"
    out = Path(directory) / "bigram.json"
    out.write_text(json.dumps({"source": source, "rows": rows}, separators=(",", ":")) + "\n")
    print(f"wrote {out} ({out.stat().st_size:,} bytes): {source}")


if __name__ == "__main__":
    main(sys.argv[1])
