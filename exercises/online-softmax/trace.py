"""Your online_attention beside the correct loop, tile by tile, on the explorable's numbers.

    python trace.py my_online.py                          (the explorable's eight tokens, blocks of 2)
    python trace.py my_online.py 'EXPLORABLE_LINK'        (copy the link from /explorables/online-softmax)
    python trace.py my_online.py 'EXPLORABLE_LINK' --json

Runs your function on the link's tokens (the head it shows: Q = K = V = that head's features, causal,
square blocks of the link's size), records m, alpha, l and o after every tile you compute, and finds
the first tile where your loop parts from the correct one: a tile computed that should not be, or
skipped that should not be, or a running value that differs. It prints that tile's rows, yours beside
the correct ones, names the slip your output shows, and prints an explorable link that draws your
values at that tile beside the correct loop's (and the slip's).
--json prints {"first_difference": {...} or null, "slips": [...] or null, "link": ...}.
Needs Python 3.10+ and numpy; the server is asked only for the explorable's tokens when the link has none.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
import urllib.parse
import urllib.request
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "tests"))
from slips import named, tiled, which  # noqa: E402

PAGE = "/explorables/online-softmax"
DEFAULT_SITE = "http://127.0.0.1:8000"
VALUES = ("m", "l", "o")  # compared; alpha is shown (a row that held nothing rescales nothing either way)


class TraceError(Exception):
    """What the learner must fix before a trace can run: the message says what."""


def read_link(link: str | None) -> tuple[np.ndarray, int, int, str]:
    """(tokens [n, d], block, head, the site) from an explorable link (none: the explorable's own tokens)."""
    parsed = urllib.parse.urlsplit(link or DEFAULT_SITE + PAGE)
    if parsed.scheme not in ("http", "https"):
        raise TraceError(f"{link!r} is not an explorable link: copy the whole address from {PAGE}")
    site = f"{parsed.scheme}://{parsed.netloc}"
    params = dict(urllib.parse.parse_qsl(parsed.fragment))
    try:
        tokens = (
            np.array([[float(x) for x in row.split(",")] for row in params["t"].split(";")])
            if "t" in params
            else np.array(preset(site))
        )
        block, head = int(params.get("block", 2)), int(params.get("head", 0))
    except ValueError:
        raise TraceError("the link's t=, block= or head= is not a number: copy the link again") from None
    if tokens.ndim != 2 or tokens.shape[1] % 2 or not 1 <= block <= len(tokens) or head not in (0, 1):
        raise TraceError("the link's tokens, block or head are not the explorable's: copy the link again")
    return tokens, block, head, site


def preset(site: str) -> list[list[float]]:
    try:
        with urllib.request.urlopen(site + "/api/v1/presets/online-softmax", timeout=10) as answer:
            return json.load(answer)["request"]["tokens"]
    except OSError as exc:
        raise TraceError(
            f"the link has no tokens (t=...) and {site} did not answer ({exc}): copy a link that has them"
        ) from None


def load(path: Path):
    if not path.is_file():
        raise TraceError(f"{path} does not exist")
    spec = importlib.util.spec_from_file_location("learners_online_softmax", path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the learner's file
        raise TraceError(f"{path.name} does not import: {type(exc).__name__}: {exc}") from None
    if not callable(getattr(module, "online_attention", None)):
        raise TraceError(f"{path.name} has no function online_attention(q, k, v, block_q, block_k, causal, record)")
    return module.online_attention


def recorded(run) -> tuple[dict[tuple[int, int], dict[str, np.ndarray]], np.ndarray]:
    """Each tile's values as `run(record)` recorded them (the last record of a tile counts), and its output."""
    tiles: dict[tuple[int, int], dict[str, np.ndarray]] = {}

    def record(i, j, m, alpha, l, o):  # noqa: E741
        tiles[(int(i), int(j))] = {
            name: np.array(value, dtype=float)
            for name, value in zip(("m", "alpha", "l", "o"), (m, alpha, l, o), strict=True)
        }

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        result = run(record)
    return tiles, np.asarray(result[0] if isinstance(result, tuple) else result, dtype=float)


def first_difference(yours, correct, n: int, block: int) -> dict | None:
    """The first tile, in the order the loop computes them, where yours parts from the correct loop."""
    for i in range(-(-n // block)):
        for j in range(-(-n // block)):
            mine, right = yours.get((i, j)), correct.get((i, j))
            if (mine is None) != (right is None):
                return {
                    "query_block": i + 1,
                    "key_block": j + 1,
                    "what": "computed" if mine else "skipped",
                    "yours": mine,
                    "correct": right,
                }
            if mine is None:
                continue
            for name in VALUES:
                a, b = mine[name], right[name]
                if a.shape != b.shape or not np.allclose(
                    np.nan_to_num(a, nan=np.inf), b, atol=1e-9, rtol=0, equal_nan=True
                ):
                    return {"query_block": i + 1, "key_block": j + 1, "what": name, "yours": mine, "correct": right}
    return None


def trace(path: Path, link: str | None) -> dict:
    tokens, block, head, site = read_link(link)
    width = tokens.shape[1] // 2
    x = tokens[:, head * width : (head + 1) * width]  # the head's features: Q = K = V under identity projections
    learner = load(path)
    yours, output = recorded(lambda record: learner(x, x, x, block, block, causal=True, record=record))
    correct, _ = recorded(lambda record: tiled(x, x, x, block, block, True, record=record))
    found = first_difference(yours, correct, len(x), block)
    slips = which(output, x, x, x, block, block, True) if output.shape == (len(x), width) else None
    state = {"t": ";".join(",".join(f"{v:g}" for v in row) for row in tokens), "block": block, "head": head}
    if slips:  # the slip that shows first: a diagonal tile skipped shows as a status, before any value
        skipped = found is not None and found["what"] == "skipped" and "online_diagonal_skipped" in slips
        state["compare"] = "online_diagonal_skipped" if skipped else slips[0]
    if found:
        state["tile"] = (found["query_block"] - 1) * -(-len(x) // block) + found["key_block"]  # stepped up to it
        state["yours"] = f"{state['tile']}:{drawn(found['yours'])}"  # drawn beside the right loop's values
    return {
        "first_difference": found,
        "slips": None if slips is None else list(slips),
        "link": f"{site}{PAGE}#{urllib.parse.urlencode(state, safe=',;')}",
    }


def number(v: float) -> str:
    """`v` as JavaScript's toExponential(5) writes it, so that trace.py and trace.ts print one link."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    mantissa, exponent = f"{v if v else 0.0:.5e}".split("e")  # -0.0 written as 0, as JavaScript does
    return f"{mantissa}e{int(exponent):+d}"


def drawn(values: dict[str, np.ndarray] | None) -> str:
    """Your values at a tile as the explorable reads them: a row per query, "m,alpha,l,o..."; or "skipped"."""
    if values is None:
        return "skipped"
    return ";".join(
        ",".join(number(float(v)) for v in (values["m"][r], values["alpha"][r], values["l"][r], *values["o"][r]))
        for r in range(len(values["m"]))
    )


def rows(values: dict[str, np.ndarray] | None) -> list[str]:
    if values is None:
        return ["  (not computed)"]
    return [
        f"  row {r + 1}: m = {values['m'][r]:.6g}, alpha = {values['alpha'][r]:.6g}, l = {values['l'][r]:.6g}, "
        f"o = [{', '.join(f'{x:.6g}' for x in values['o'][r])}]"
        for r in range(len(values["m"]))
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Your online loop beside the correct one, tile by tile.")
    parser.add_argument("file", type=Path, help="your file with online_attention (e.g. starter.py)")
    parser.add_argument("link", nargs="?", help="a link copied from /explorables/online-softmax")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    try:
        result = trace(args.file, args.link)
    except TraceError as exc:
        print(f"trace: {exc}", file=sys.stderr)
        return 2
    if args.json:
        plain = lambda v: {k: np.asarray(x).tolist() for k, x in v.items()} if isinstance(v, dict) else v  # noqa: E731
        found = result["first_difference"]
        if found:
            found = {**found, "yours": plain(found["yours"]), "correct": plain(found["correct"])}
        print(json.dumps({**result, "first_difference": found}, allow_nan=False, default=str))
        return 0
    found = result["first_difference"]
    if found is None:
        print("Every tile matches the correct loop: your online softmax is the softmax.")
    else:
        tile = f"query block {found['query_block']}, key block {found['key_block']}"
        what = {
            "computed": "you computed it; the correct loop skips it (every key is in the future)",
            "skipped": "you skipped it; the correct loop computes it",
            "m": "the running maximum m differs",
            "l": "the running sum l differs",
            "o": "the unnormalised output o differs",
        }[found["what"]]
        print(f"First difference: the tile at {tile}: {what}.")
        print("Yours:", *rows(found["yours"]), "Correct:", *rows(found["correct"]), sep="\n")
        print(f"What went wrong: {named(None if result['slips'] is None else tuple(result['slips']))}.")
    print(f"See it drawn: {result['link']}")
    return 0 if found is None else 1


if __name__ == "__main__":
    sys.exit(main())
