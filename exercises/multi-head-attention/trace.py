"""Your multi_head_attention beside the engine's, on the numbers the workbench shows.

    python trace.py my_attention.py 'WORKBENCH_LINK'          (copy the link from the workbench)
    python trace.py my_attention.py 'WORKBENCH_LINK' --open   (and open the answer in a browser)
    python trace.py my_attention.py 'WORKBENCH_LINK' --json

Runs your function on the link's tokens, heads and mask, compares each stage it returns
(weights, head outputs, concatenation, output) with the correct result, names the first that
differs and the known mistake that reproduces your numbers, and prints a workbench link that
draws "yours" beside "correct" at every stage. --json prints
{"first_divergence": STAGE or "identical", "mistake": ID or null, "max_error": ..., "link": ...,
"left_out": [the link's settings the new link cannot carry, each with why]}.
Needs Python 3.10+ and numpy; the server is asked only for the learned W_O when the link uses it.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.parse
import webbrowser
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE / "tests")]
from learner import LearnerError, describe, load, nan_problem, outputs, shape_problems  # noqa: E402
from mistakes import ALL, SYMPTOMS, attention, which  # noqa: E402
from submit import SubmitError, fetch_json  # noqa: E402

# The learner's parts as the workbench names its stages (data-stage), in pipeline order.
STAGES = {"weights": "weights", "head-output": "head_outputs", "concat": "concatenated", "output": "output"}
STAGE_NAMES = {
    "weights": "the weights",
    "head-output": "the head outputs",
    "concat": "the concatenation",
    "output": "the output",
}
LEARNED = "/api/v1/presets/workbench-learned"


class TraceError(Exception):
    """A link this exercise cannot trace: the message says why and what to do."""


def read_link(link: str) -> tuple[dict, dict[str, str], str]:
    """(the exercise case, the hash's parameters, the page's address) of a workbench link."""
    parsed = urllib.parse.urlsplit(link)
    if parsed.scheme not in ("http", "https") or not parsed.fragment:
        raise TraceError(
            f"{link!r} is not a workbench link: copy the whole address, with its #t=... part, from the workbench"
        )
    params = dict(urllib.parse.parse_qsl(parsed.fragment, keep_blank_values=True))
    try:
        tokens = [[float(v) for v in row.split(",")] for row in params["t"].split(";")]
        heads = int(params.get("heads", "2"))
    except (KeyError, ValueError):
        raise TraceError("the link holds no tokens (its #t=... part): copy it again from the workbench") from None
    if len({len(row) for row in tokens}) != 1 or heads < 1 or len(tokens[0]) % heads:
        raise TraceError(f"the link's tokens ({len(tokens)} rows) and heads ({heads}) do not fit together")
    unsupported = [
        label
        for key, label, default in (
            ("kv", "fewer key/value heads than heads (grouped-query attention)", str(heads)),
            ("rope", "RoPE", ""),
            ("qkv", "learned W_Q, W_K, W_V", "identity"),
        )
        if params.get(key, default) != default
    ]
    if unsupported:
        raise TraceError(
            f"the link uses {' and '.join(unsupported)}; the exercise's function computes Q = K = V = the tokens, "
            "one key/value head per head, no RoPE: switch those off in the workbench and copy the link again"
        )
    case = {"tokens": tokens, "heads": heads, "causal": params.get("causal", "1") != "0"}
    origin = f"{parsed.scheme}://{parsed.netloc}"
    if params.get("wo", "identity") == "learned":
        try:
            case["output_projection"] = fetch_json(origin + LEARNED)["request"]["projections"]["output"]
        except (SubmitError, KeyError, TypeError) as exc:
            raise TraceError(f"the link uses the learned W_O, which comes from {origin}{LEARNED}: {exc}") from None
    page = urllib.parse.urlunsplit((parsed.scheme, parsed.netloc, parsed.path, parsed.query, ""))
    return case, params, page


def compare(yours: dict[str, np.ndarray], correct: dict[str, np.ndarray]) -> dict[str, str]:
    """stage -> "identical", "differs" or "wrong shape", with the workbench's tolerance."""
    verdicts = {}
    for stage, part in STAGES.items():
        mine, theirs = yours[part], np.asarray(correct[part], dtype=float)
        if mine.shape != theirs.shape:
            verdicts[stage] = "wrong shape"
        else:
            same = np.isclose(mine, theirs, rtol=1e-9, atol=1e-12).all()
            verdicts[stage] = "identical" if same else "differs"
    return verdicts


def max_error(yours: dict[str, np.ndarray], correct: dict[str, np.ndarray]) -> float:
    errors = [0.0]
    for part in STAGES.values():
        if yours[part].shape == np.shape(correct[part]):
            diff = np.abs(yours[part] - correct[part])
            errors.extend(diff[np.isfinite(diff)].ravel().tolist())
    return float(max(errors))


def known_mistake(yours: dict[str, np.ndarray], case: dict) -> str | None:
    """The one known mistake that computes your numbers (NaN standing for a row that sees nothing)."""
    result = {part: np.nan_to_num(values, nan=0.0) for part, values in yours.items()}
    expected = attention(case["tokens"], case["heads"], case["causal"])
    parts = tuple(p for p in ("weights", "concatenated", "output") if result[p].shape == expected[p].shape)
    if not parts:
        return None
    return which(
        result,
        case["tokens"],
        case["heads"],
        case["causal"],
        ALL,
        parts=parts,
        output_projection=case.get("output_projection"),
    )


# What a link with your numbers cannot carry: yours is compared with the correct computation, so the
# broken reuse and a comparison with a failure mode are left out (and said); a replayed cell goes too.
LEFT_OUT = {
    "reuse": "the broken reuse (your numbers are compared with the correct computation)",
    "compare": "the failure-mode comparison (yours takes its place)",
    "cell": "the replayed weight",
}
LESSON = "multi-head-attention"  # the workbench's way back


def yours_link(page: str, params: dict[str, str], yours: dict[str, np.ndarray]) -> str:
    """The workbench link with your numbers beside the correct ones: every setting read, but those
    of LEFT_OUT; and the lesson, for a way back to it."""
    kept = {k: v for k, v in params.items() if k not in (*LEFT_OUT, "yours", "lesson")}
    numbers = {stage: _rounded(yours[part]) for stage, part in STAGES.items()}
    kept["yours"] = json.dumps(numbers, separators=(",", ":"))
    kept["lesson"] = LESSON
    return page + "#" + urllib.parse.urlencode(kept, quote_via=urllib.parse.quote, safe=",;[]{}:")


def left_out(params: dict[str, str]) -> list[str]:
    """The settings of the link that the link with your numbers does not carry, said in words."""
    return [f"{key}={params[key]}: {why}" for key, why in LEFT_OUT.items() if params.get(key) not in (None, "", "0")]


def _rounded(values: np.ndarray):
    if values.ndim == 0:
        value = float(values)
        return float(f"{value:.12g}") if np.isfinite(value) else None
    return [_rounded(row) for row in values]


def trace(path: str, link: str) -> dict:
    case, params, page = read_link(link)
    yours = outputs(load(path), case)
    correct = attention(case["tokens"], case["heads"], case["causal"], output_projection=case.get("output_projection"))
    stages = compare(yours, correct)
    first = next((s for s, v in stages.items() if v != "identical"), "identical")
    return {
        "first_divergence": first,
        "mistake": None if first == "identical" else known_mistake(yours, case),
        "max_error": max_error(yours, correct),
        "stages": stages,
        "problems": shape_problems(yours, case) + [p for p in [nan_problem(yours, case)] if p],
        "case": describe(case),
        "link": yours_link(page, params, yours),
        "left_out": left_out(params),
    }


def report(result: dict) -> str:
    lines = [f"Your multi_head_attention on the workbench's case ({result['case']}):"]
    lines += [f"  {'✓' if v == 'identical' else '✗'} {STAGE_NAMES[s]}: {v}" for s, v in result["stages"].items()]
    lines += [f"  {p}" for p in result["problems"]]
    first, mistake = result["first_divergence"], result["mistake"]
    if first == "identical":
        lines.append("Identical to the engine at every stage your function returns.")
    else:
        lines.append(f"The first difference is {STAGE_NAMES[first]} (largest difference {result['max_error']:.3g}).")
        if mistake:
            symptom = f": {SYMPTOMS[mistake]}" if mistake in SYMPTOMS else ""
            lines.append(f"Your numbers are what the known mistake {mistake} computes{symptom}.")
        else:
            lines.append("No single known mistake computes these numbers (several at once, or a new one).")
    if result["left_out"]:
        lines.append("The link below leaves out " + "; ".join(result["left_out"]) + ".")
    lines.append("Yours beside the engine's, at every stage, in the workbench:")
    lines.append(f"  {result['link']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", help="your implementation (a .py file defining multi_head_attention)")
    parser.add_argument("link", help="a workbench link (the page's address, with its #t=... part)")
    parser.add_argument("--json", action="store_true", help="print the verdict as JSON")
    parser.add_argument("--open", action="store_true", help="open the workbench link in a browser")
    args = parser.parse_args(argv)
    try:
        result = trace(args.path, args.link)
    except (LearnerError, TraceError, SubmitError) as exc:
        print(f"✗ {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(
            json.dumps(
                {
                    k: result[k]
                    for k in ("first_divergence", "mistake", "max_error", "stages", "problems", "link", "left_out")
                }
            )
        )
    else:
        print(report(result))
    if args.open:
        webbrowser.open(result["link"])
    return 0 if result["first_divergence"] == "identical" else 1


if __name__ == "__main__":
    sys.exit(main())
