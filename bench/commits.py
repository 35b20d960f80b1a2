"""One benchmark run against two commits in the same session, alternating, so the VM's swings
fall on both: the working tree against an earlier commit checked out in a temporary worktree.

    python bench/commits.py 967341b bench/ingest.py [--rounds 3] [-- args for the benchmark]

Each round runs the benchmark once per side with --json and keeps each result by its name; the
report gives each figure's median per side and the ratio (working tree / earlier commit).
Both sides use this venv: the earlier commit must run with the packages installed here.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_once(tree: Path, script: str, extra: list[str]) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, str(tree / script), "--json", *extra],
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
    )
    figures = {}
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            result = json.loads(line)
            if "figure" in result:
                figures[result["name"].split(";")[0]] = float(result["figure"])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("commit")
    parser.add_argument("script", help="a benchmark under bench/ that takes --json")
    parser.add_argument("--rounds", type=int, default=3)
    argv = sys.argv[1:]
    mine, extra = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    args = parser.parse_args(mine)
    with tempfile.TemporaryDirectory() as parent:
        before = Path(parent) / "before"
        subprocess.run(["git", "worktree", "add", "--detach", str(before), args.commit], cwd=ROOT, check=True)
        try:
            sides: dict[str, dict[str, list[float]]] = {"before": {}, "now": {}}
            for _ in range(args.rounds):
                for side, tree in (("before", before), ("now", ROOT)):
                    for name, figure in run_once(tree, args.script, extra).items():
                        sides[side].setdefault(name, []).append(figure)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(before)], cwd=ROOT, check=True)
    for name, figures in sides["now"].items():
        earlier = sides["before"].get(name)
        if not earlier:
            print(f"{name}: {statistics.median(figures):.0f} now; not measured at {args.commit}")
            continue
        now, then = statistics.median(figures), statistics.median(earlier)
        print(
            f"{name}: {now:.0f} now vs {then:.0f} at {args.commit} -> ratio {now / then:.3f} "
            f"(rounds now {figures}, before {earlier})"
        )


if __name__ == "__main__":
    main()
