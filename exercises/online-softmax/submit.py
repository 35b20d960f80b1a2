"""Answer an online-softmax challenge with your online_attention: the server checks the numbers.

    python submit.py my_online.py --challenge URL           (the lesson page shows the whole command)
    python submit.py my_online.py --challenge URL --print   (JSON for the lesson's paste box)

Your code runs here, on your machine; only its numbers are sent. Needs Python 3.10+ and numpy.
The same by hand, from any language: GET the challenge URL (JSON: its `cases`, each with tokens [n][d],
causal, block_q and block_k; one head, Q = K = V = tokens), compute each case's output [n][d] and
lse [n], then POST {"answers": [{"output": ..., "lse": ...}, ...]} to its `answers_url`. The reply
names any slip it sees, case by case.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import locale
import os
import sys
import urllib.error
import urllib.request
import warnings
from pathlib import Path

import numpy as np

TIMEOUT = 30  # seconds for each request


class SubmitError(Exception):
    """Something the learner can act on: the message says what."""


def language() -> str:
    """The server's verdict in the learner's language: ONLINE_LANG, else the locale (es_ES.UTF-8: es)."""
    chosen = os.environ.get("ONLINE_LANG") or os.environ.get("LANG") or (locale.getlocale()[0] or "en")
    return chosen.split(".")[0].replace("_", "-") or "en"


def load(path: Path):
    """The file's `online_attention`, or a message that says what is missing."""
    if not path.is_file():
        raise SubmitError(f"{path} does not exist")
    spec = importlib.util.spec_from_file_location("learners_online_softmax", path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the learner's file
        raise SubmitError(f"{path.name} does not import: {type(exc).__name__}: {exc}") from None
    if not callable(getattr(module, "online_attention", None)):
        raise SubmitError(f"{path.name} has no function online_attention(q, k, v, block_q, block_k, causal)")
    return module.online_attention


def fetch_json(url: str, body: dict | None = None) -> dict:
    """GET (or POST `body` to) `url`; a refusal becomes its problem detail, never a traceback."""
    data = None if body is None else json.dumps(body, allow_nan=False).encode()
    request = urllib.request.Request(
        url, data=data, headers={"Accept": "application/json", "Accept-Language": language()}
    )
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        raise SubmitError(f"{url} answered {exc.code}: {_detail(exc.read())}") from None
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        raise SubmitError(
            f"could not reach {url} ({getattr(exc, 'reason', exc)}): add --print and paste the JSON it prints "
            "into the lesson page instead"
        ) from None
    except ValueError:
        raise SubmitError(f"{url} did not answer JSON: is it the challenge link the lesson shows?") from None


def _detail(raw: bytes) -> str:
    try:
        problem = json.loads(raw)
    except ValueError:
        return raw[:200].decode("utf-8", "replace")
    said = problem.get("detail") or problem.get("title") or ""
    return f"{said} {json.dumps(problem['errors'])}" if problem.get("errors") else said


def read_challenge(source: str) -> dict:
    """The challenge behind a URL or in a JSON file, if it can still be answered."""
    if source.startswith(("http://", "https://")):
        challenge = fetch_json(source)
    else:
        try:
            challenge = json.loads(Path(source).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise SubmitError(f"could not read the challenge from {source}: {exc}") from None
    if not (isinstance(challenge, dict) and isinstance(challenge.get("cases"), list) and "answers_url" in challenge):
        raise SubmitError(f"{source} is not a challenge (it has no cases or answers_url)")
    if challenge.get("status") in ("solved", "expired"):
        raise SubmitError(f"this challenge is {challenge['status']}; ask the lesson page for a new one")
    return challenge


def describe(case: dict) -> str:
    n, d = len(case["tokens"]), len(case["tokens"][0])
    mask = "causal" if case["causal"] else "no mask"
    return f"{n} tokens of width {d}, tiles of {case['block_q']} x {case['block_k']}, {mask}"


def answers_for(online_attention, cases: list[dict]) -> list[dict]:
    """Your function's output and L for each case (Q = K = V = its tokens), JSON-ready (NaN as null)."""
    answers = []
    for i, case in enumerate(cases):
        x = np.asarray(case["tokens"], dtype=float)  # [n, d]
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore", RuntimeWarning)
                result = online_attention(x, x, x, case["block_q"], case["block_k"], causal=case["causal"])
        except Exception as exc:  # the learner's code: say where, keep going no further
            raise SubmitError(f"case {i + 1} ({describe(case)}): {type(exc).__name__}: {exc}") from None
        if not (isinstance(result, tuple) and len(result) == 2):
            raise SubmitError(f"case {i + 1} ({describe(case)}): online_attention must return (output, lse)")
        output, lse = (np.asarray(part, dtype=float) for part in result)
        if output.shape != x.shape or lse.shape != (len(x),):
            raise SubmitError(
                f"case {i + 1} ({describe(case)}): output has shape {list(output.shape)} and lse "
                f"{list(lse.shape)}; they must be {list(x.shape)} and [{len(x)}]"
            )
        answers.append({"output": to_json(output), "lse": to_json(lse)})
    return answers


def to_json(values: np.ndarray):
    """Nested lists with NaN (and infinities) as null: JSON has no NaN."""
    if values.ndim == 0:
        value = float(values)
        return value if np.isfinite(value) else None
    return [to_json(row) for row in values]


def report(verdict: dict) -> str:
    lines = []
    for case in verdict.get("cases", []):
        named = f" [{', '.join(case['mistakes'])}]" if case["mistakes"] else ""
        lines.append(f"{'✓' if case['correct'] else '✗'} case {case['case']}:{named} {case['message']}")
    lines.append(verdict["message"])
    if verdict.get("correct"):
        lines.append("The lesson's checkpoint is complete: reload the lesson page to see it.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", help="your implementation (a .py file defining online_attention)")
    parser.add_argument(
        "--challenge", required=True, help="the challenge link the lesson shows, or a challenge JSON file"
    )
    parser.add_argument("--print", dest="print_only", action="store_true", help="print the answers for the paste box")
    args = parser.parse_args(argv)
    try:
        online_attention = load(Path(args.path))
        challenge = read_challenge(args.challenge)
        answers = answers_for(online_attention, challenge["cases"])
        if args.print_only:
            print(json.dumps({"challenge": challenge.get("id"), "answers": answers}, separators=(",", ":")))
            return 0
        verdict = fetch_json(challenge["answers_url"], {"answers": answers})
    except SubmitError as exc:
        print(f"✗ {exc}", file=sys.stderr)
        return 2
    print(report(verdict))
    return 0 if verdict.get("correct") else 1


if __name__ == "__main__":
    sys.exit(main())
