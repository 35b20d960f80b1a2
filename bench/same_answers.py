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


# Beyond the presets: the long-context, grouped, latent and online options each answer with, so a move of
# how those values travel is checked too (every failure mode on each).
TOKENS = [
    [0.9, -0.3, 0.4, 1.1],
    [0.2, 1.0, -0.7, 0.5],
    [-1.2, 0.3, 0.8, 0.6],
    [0.5, 0.5, -0.5, -0.2],
    [1.4, -0.9, 0.1, 0.3],
    [-0.4, 0.7, 1.2, -1.0],
    [0.0, -1.1, 0.6, 0.9],
]
VARIANTS = {
    "window": {"tokens": TOKENS, "heads": 2, "window": 3},
    "window-sinks-rope": {"tokens": TOKENS, "heads": 2, "window": 3, "sinks": 1, "rope": {"style": "half"}},
    "sink-logit": {"tokens": TOKENS, "heads": 2, "window": 4, "sink_logit": [0.5, -0.25]},
    "streaming": {
        "tokens": TOKENS,
        "heads": 2,
        "window": 3,
        "sinks": 1,
        "rope": {"style": "interleaved"},
        "positions": "cache",
    },
    "gqa-rope": {"tokens": TOKENS, "heads": 2, "kv_heads": 1, "rope": {"style": "half", "base": 500.0}},
    "bidirectional": {"tokens": TOKENS, "heads": 2, "causal": False},
}


def bodies(presets: dict) -> dict[str, dict]:
    """Every body asked: each preset's request and each variant, with the online blocks where absent."""
    found = {name: preset["request"] for name, preset in sorted(presets.items())}
    found.update(VARIANTS)
    kv = presets["kv-cache"]["request"]
    found["kv-cache-absorbed"] = {**kv, "latent": {**kv["latent"], "absorbed": True}}
    return found


def digest(tree: Path) -> dict[str, str]:
    """Every answer of `tree`'s service (its `service` package imported from there), hashed."""
    sys.path.insert(0, str(tree))
    from service.app import create_app
    from service.compute.failure_modes import REGISTRY
    from service.presets import presets

    with tempfile.TemporaryDirectory() as scratch:
        app = create_app(
            {
                "env": "testing",
                "database_url": f"sqlite:///{scratch}/answers.db",
                "ratelimit_enabled": False,
                "public_url": "http://localhost",
            }
        )
        client, found = app.test_client(), {}
        engine = sorted(m.id for m in REGISTRY.values() if m.engine)
        tiled = sorted(m.id for m in REGISTRY.values() if m.tiled)
        asks = [
            ("", None),
            *(("", m) for m in engine),
            *(("/compare", m) for m in engine),
            ("/decode", None),
            *(("/decode", m) for m in engine),
            ("/tiled", None),
            *(("/tiled", m) for m in tiled),
        ]
        for name, request in bodies(presets()).items():
            for path, mode in asks:
                body = {k: v for k, v in request.items() if k not in ("block_q", "block_k")}  # a tiled preset's
                body = {**body, **({"failure_mode": mode} if mode else {})}
                if path == "/tiled":
                    body = {**body, "block_q": 2, "block_k": 3}
                answer = client.post(f"/api/v1/attention{path}", json=body)
                found[f"{name} {path or '/'} {mode or '-'}"] = (
                    f"{answer.status_code} {hashlib.sha256(answer.data).hexdigest()}"
                )
        for path, body in (
            ("/api/v1/models/bytes-2l-attn/attention", {"text": "the cat sat on the cat"}),
            ("/api/v1/models/bytes-2l-attn/attention", {"text": "abcabc", "ablate": [{"layer": 1, "head": 2}]}),
            (
                "/api/v1/kv-cache",
                {"layers": 32, "heads": 32, "kv_heads": 8, "d_head": 128, "tokens": 8192, "bytes_per_element": 2.0},
            ),
        ):
            answer = client.post(path, json=body)
            found[f"{path} {json.dumps(body, sort_keys=True)}"] = (
                f"{answer.status_code} {hashlib.sha256(answer.data).hexdigest()}"
            )
        for path in ("/api/v1/failure-modes", "/api/v1/presets", "/api/v1/kv-cache/presets"):
            answer = client.get(path)
            found[path] = f"{answer.status_code} {hashlib.sha256(answer.data).hexdigest()}"
        app.extensions["db"].dispose()
    return found


def answers_at(commit: str | None, parent: Path) -> dict[str, str]:
    tree = ROOT
    if commit is not None:
        tree = parent / commit
        subprocess.run(["git", "worktree", "add", "--quiet", "--detach", str(tree), commit], cwd=ROOT, check=True)
    try:
        done = subprocess.run(
            [sys.executable, __file__, "--digest", str(tree)], cwd=tree, capture_output=True, text=True, check=True
        )
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
