"""The answers of POST /attention, /attention/compare and /attention/decode over every preset and
every failure mode, at earlier commits and in the working tree, compared byte for byte: what a
change that says it changes no behaviour (a refactor) shows.

    python bench/same_answers.py b0eebd6 669e27b 1ccaaa1     (the first commit is the reference)

Each commit is checked out in a temporary worktree and served in process (Flask's test client, a
scratch SQLite database) with this venv's packages. An answer is named by its preset, path and
failure mode and kept as its status and SHA-256; the report names every answer that differs from
the first commit's, or is missing or new. Exits 1 when any does.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def digest(tree: Path) -> dict[str, str]:
    """Every answer of `tree`'s service (its `service` package imported from there), hashed."""
    sys.path.insert(0, str(tree))
    from service.app import create_app
    from service.compute.failure_modes import FAILURE_MODES
    from service.presets import presets

    with tempfile.TemporaryDirectory() as scratch:
        app = create_app({"env": "testing", "database_url": f"sqlite:///{scratch}/answers.db",
                          "ratelimit_enabled": False, "public_url": "http://localhost"})  # fmt: skip
        client, modes, found = app.test_client(), sorted(FAILURE_MODES), {}
        asks = [("", None), *(("", m) for m in modes), *(("/compare", m) for m in modes), ("/decode", None),
                *(("/decode", m) for m in modes)]  # fmt: skip
        for name, preset in sorted(presets().items()):
            for path, mode in asks:
                body = {**preset["request"], **({"failure_mode": mode} if mode else {})}
                answer = client.post(f"/api/v1/attention{path}", json=body)
                found[f"{name} {path or '/'} {mode or '-'}"] = (
                    f"{answer.status_code} {hashlib.sha256(answer.data).hexdigest()}"
                )
        app.extensions["db"].dispose()
    return found


def answers_at(commit: str | None, parent: Path) -> dict[str, str]:
    tree = ROOT
    if commit is not None:
        tree = parent / commit
        subprocess.run(["git", "worktree", "add", "--quiet", "--detach", str(tree), commit], cwd=ROOT, check=True)
    try:
        done = subprocess.run([sys.executable, __file__, "--digest", str(tree)], cwd=tree, capture_output=True,
                              text=True, check=True)  # fmt: skip
        return json.loads(done.stdout)
    finally:
        if commit is not None:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("commits", nargs="*", help="the reference first; the working tree is compared last")
    parser.add_argument("--digest", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--without-working-tree", action="store_true")
    args = parser.parse_args()
    if args.digest:
        print(json.dumps(digest(args.digest)))
        return 0
    sides: list[str | None] = [*args.commits, *([] if args.without_working_tree else [None])]
    if len(sides) < 2:
        parser.error("name at least one commit (two with --without-working-tree)")
    with tempfile.TemporaryDirectory() as parent:
        reference, *others = [(side or "working tree", answers_at(side, Path(parent))) for side in sides]
    differing = 0
    for name, answers in others:
        changed = sorted(k for k in reference[1].keys() | answers.keys() if reference[1].get(k) != answers.get(k))
        differing += len(changed)
        print(f"{name}: {len(answers)} answers, {len(changed)} differ from {reference[0]}'s {len(reference[1])}")
        for key in changed:
            print(f"  {key}: {reference[1].get(key, 'missing')} -> {answers.get(key, 'missing')}")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
