"""Every trace the attention resource answers, over the presets, the variants and the failure modes,
as digests of the bytes served: `python bench/trace_corpus.py OUT.json` in two checkouts, then
`python bench/trace_corpus.py --compare A.json B.json`, proves a refactor left the answers byte for
byte as they were (docs/architecture.md, "Moving code without changing an answer")."""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any


def requests() -> dict[str, tuple[str, dict[str, Any], str]]:
    """name -> (path, body, accept): every preset on every route, each variant, each failure mode."""
    from service.compute.failure_modes import REGISTRY
    from service.presets import presets

    found: dict[str, tuple[str, dict[str, Any], str]] = {}
    bodies = {name: preset["request"] for name, preset in presets().items()}
    x = [
        [1.0, 0.5, -0.5, 1.0, 0.3, -0.2, 0.8, 0.1],
        [0.2, 1.0, 1.5, -0.3, 0.4, 0.9, -0.6, 0.7],
        [-1.0, 0.3, 0.8, 0.6, -0.5, 0.2, 0.1, 1.2],
        [0.7, -0.8, 0.2, 0.5, 1.1, -0.4, 0.3, -0.9],
        [0.05, 0.6, -1.2, 0.9, 0.2, 0.3, -0.7, 0.4],
    ]
    latent = {
        "down": [[(i * 3 + j) % 5 / 4 - 0.5 for j in range(4)] for i in range(8)],
        "up_key": [[(i + 2 * j) % 7 / 6 - 0.4 for j in range(8)] for i in range(4)],
        "up_value": [[(2 * i + j) % 5 / 4 - 0.3 for j in range(8)] for i in range(4)],
    }
    rope_parts = {
        "rope_key": [[(i + j) % 3 / 2 - 0.5 for j in range(2)] for i in range(8)],
        "rope_query": [[(i * j) % 5 / 4 - 0.5 for j in range(4)] for i in range(8)],
    }
    bodies |= {
        "mqa": {"tokens": x, "heads": 4, "kv_heads": 1},
        "gqa": {"tokens": x, "heads": 4, "kv_heads": 2},
        "gqa-rope-half": {"tokens": x, "heads": 4, "kv_heads": 2, "rope": {"style": "half"}},
        "rope-interleaved": {"tokens": x, "heads": 2, "rope": {"style": "interleaved", "base": 100.0}},
        "not-causal": {"tokens": x, "heads": 2, "causal": False},
        "one-position": {"tokens": x[:1], "heads": 2},
        "latent": {"tokens": x, "heads": 2, "latent": latent},
        "latent-absorbed": {"tokens": x, "heads": 2, "latent": {**latent, "absorbed": True}},
        "latent-rope": {"tokens": x, "heads": 2, "latent": {**latent, **rope_parts}},
        "latent-rope-absorbed": {"tokens": x, "heads": 2, "latent": {**latent, **rope_parts, "absorbed": True}},
        "rounded": {"tokens": x, "heads": 4, "precision": 3, "include": ["weights", "heads.output", "residual"]},
    }
    engine_modes = [m.id for m in REGISTRY.values() if m.engine]
    for name, body in bodies.items():
        found[f"attention/{name}"] = ("/api/v1/attention", body, "application/json")
        found[f"decode/{name}"] = ("/api/v1/attention/decode", {**body, "causal": True}, "application/json")
        for mode in engine_modes:
            found[f"attention/{name}/{mode}"] = (
                "/api/v1/attention",
                {**body, "failure_mode": mode},
                "application/json",
            )
            found[f"compare/{name}/{mode}"] = (
                "/api/v1/attention/compare",
                {**body, "failure_mode": mode},
                "application/json",
            )
            found[f"decode/{name}/{mode}"] = (
                "/api/v1/attention/decode",
                {**body, "causal": True, "failure_mode": mode},
                "application/json",
            )
    for prefill in (2, 5):
        found[f"decode/gqa-rope/prefill-{prefill}"] = (
            "/api/v1/attention/decode",
            {**bodies["gqa-rope-half"], "prefill": prefill},
            "application/json",
        )
    for name in ("workbench", "four-heads", "latent-rope-absorbed"):
        found[f"binary/{name}"] = ("/api/v1/attention", bodies[name], "application/octet-stream")
        compared = {**bodies[name], "failure_mode": "no_scaling"}
        found[f"binary32/{name}/compare"] = (
            "/api/v1/attention/compare",
            compared,
            "application/octet-stream; dtype=float32",
        )
    return found


def digests() -> dict[str, str]:
    from service.app import create_app
    from service.db.migrate import upgrade

    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'corpus.db'}"
        upgrade(url)
        app = create_app({"env": "testing", "database_url": url, "ratelimit_enabled": False})
        client = app.test_client()
        out = {}
        for name, (path, body, accept) in requests().items():
            try:
                answer = client.post(path, json=body, headers={"Accept": accept})
            except Exception as exc:  # a bug the corpus found: recorded, so a fix shows as a difference
                out[name] = f"raised {type(exc).__name__}"
                continue
            out[name] = f"{answer.status_code} {hashlib.sha256(answer.data).hexdigest()}"
        for path in ("/api/v1/presets", "/api/v1/failure-modes", "/api/v1/kv-cache/presets"):
            answer = client.get(path)
            out[path] = f"{answer.status_code} {hashlib.sha256(answer.data).hexdigest()}"
        app.extensions["db"].dispose()
    return out


def main(argv: list[str]) -> int:
    if argv[:1] == ["--compare"]:
        a, b = (json.loads(Path(p).read_text()) for p in argv[1:3])
        differ = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
        print(f"{len(a)} answers, {len(differ)} differ" + "".join(f"\n  {k}: {a.get(k)} -> {b.get(k)}" for k in differ))
        return 1 if differ else 0
    Path(argv[0]).write_text(json.dumps(digests(), indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
