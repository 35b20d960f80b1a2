"""Answer a challenge with your multi_head_attention: the server checks the numbers.

    python submit.py my_attention.py --challenge URL      (the lesson page shows the whole command)
    python submit.py my_attention.py --challenge URL --print   (JSON for the lesson's paste box)

Your code runs here, on your machine; only its numbers are sent. Needs Python 3.10+ and numpy.
The same by hand, from any language: GET the challenge URL (JSON: its `cases`, each with
tokens, heads, causal and maybe output_projection), compute each case, then POST
{"answers": [{"weights": ..., "head_outputs": ..., "concatenated": ..., "output": ...}, ...]}
to its `answers_url`. The reply names any mistake it sees.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from learner import LearnerError, call, describe, language, load, say  # noqa: E402

TIMEOUT = 30  # seconds for each request


class SubmitError(Exception):
    """Something the learner can act on: the message says what."""


class Unreachable(SubmitError):
    """The server could not be reached at all."""


def fetch_json(url: str, body: dict | None = None) -> dict:
    """GET (or POST `body` to) `url`; a refusal becomes its problem detail, never a traceback."""
    data = None if body is None else json.dumps(body, allow_nan=False).encode()
    # The server's verdict in the messages' language (MHA_LANG, else the locale), as the tests speak.
    headers = {"Accept": "application/json", "Accept-Language": language()}
    request = urllib.request.Request(url, data=data, headers=headers)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        raise SubmitError(say("submit_answered", url=url, status=exc.code, detail=_detail(exc.read()))) from None
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        raise Unreachable(say("submit_unreachable", url=url, reason=getattr(exc, "reason", exc))) from None
    except ValueError:
        raise SubmitError(say("submit_not_json", url=url)) from None


def _detail(raw: bytes) -> str:
    try:
        problem = json.loads(raw)
    except ValueError:
        return raw[:200].decode("utf-8", "replace")
    detail = problem.get("detail") or problem.get("title") or ""
    errors = problem.get("errors")
    return f"{detail} {json.dumps(errors)}" if errors else detail


def read_challenge(source: str) -> dict:
    """The challenge behind a URL or in a JSON file, if it can still be answered."""
    if source.startswith(("http://", "https://")):
        challenge = fetch_json(source)
    else:
        try:
            challenge = json.loads(Path(source).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise SubmitError(f"could not read the challenge from {source}: {exc}") from None
    if (
        not isinstance(challenge, dict)
        or not isinstance(challenge.get("cases"), list)
        or "answers_url" not in challenge
    ):
        raise SubmitError(f"{source} is not a challenge (it has no cases or answers_url)")
    if challenge.get("status") == "solved":
        raise SubmitError("this challenge is already solved; ask the lesson page for a new one")
    if challenge.get("status") == "expired":
        raise SubmitError("this challenge has expired; ask the lesson page for a new one")
    return challenge


def answers_for(function, cases: list[dict]) -> list[dict]:
    """Your function's answer to each case, JSON-ready (NaN as null: the server names it)."""
    answers = []
    for i, case in enumerate(cases):
        try:
            arrays = call(function, case)
        except LearnerError as exc:
            raise SubmitError(f"case {i + 1} ({describe(case)}): {exc}") from None
        answers.append({part: to_json(values) for part, values in arrays.items()})
    return answers


def to_json(values: np.ndarray):
    """Nested lists with NaN (and infinities) as null: JSON has no NaN."""
    array = np.asarray(values, dtype=float)
    if array.ndim == 0:
        value = float(array)
        return value if np.isfinite(value) else None
    return [to_json(row) for row in array]


def report(verdict: dict) -> str:
    lines = []
    for case in verdict.get("cases", []):
        mark = "✓" if case["correct"] else "✗"
        named = f" [{', '.join(case['mistakes'])}]" if case["mistakes"] else ""
        lines.append(f"{mark} {say('submit_case', case=case['case'])}:{named} {case['message']}")
    lines.append(verdict["message"])
    if verdict.get("correct"):
        lines.append(say("submit_complete"))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", help="your implementation (a .py file defining multi_head_attention)")
    parser.add_argument(
        "--challenge", required=True, help="the challenge link the lesson shows, or a challenge JSON file"
    )
    parser.add_argument("--print", dest="print_only", action="store_true", help="print the answers for the paste box")
    args = parser.parse_args(argv)
    try:
        function = load(args.path)
        challenge = read_challenge(args.challenge)
        answers = answers_for(function, challenge["cases"])
        if args.print_only:
            print(json.dumps({"challenge": challenge.get("id"), "answers": answers}, separators=(",", ":")))
            return 0
        try:
            verdict = fetch_json(challenge["answers_url"], {"answers": answers})
        except Unreachable as exc:
            raise SubmitError(say("submit_offline", reason=exc)) from None
    except (LearnerError, SubmitError) as exc:
        print(f"✗ {exc}", file=sys.stderr)
        return 2
    print(report(verdict))
    return 0 if verdict.get("correct") else 1


if __name__ == "__main__":
    sys.exit(main())
