"""`make bench`: run every benchmark, then rewrite the results table in docs/performance.md.

`--only compute,api,ingest` runs those scripts alone (analytics' populating of 10 million events
takes most of an hour) and writes their rows to a second table, marked as such, leaving the
full run's table as it was.

Each benchmark script prints JSON lines (`--json`), one per figure, with: name, figure, unit,
baseline, baseline_figure, ratio, budget, ok. A benchmark whose requirements are missing
(torch, chromium, PostgreSQL) prints a row with `skipped` and the reason.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "performance.md"
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"
PARTIAL = "<!-- bench-partial:begin -->", "<!-- bench-partial:end -->"

BENCHMARKS = [
    ["bench/compute.py"],
    ["bench/compute.py", "--default-allocator"],
    ["bench/decode.py"],
    ["bench/speculative.py"],
    ["bench/api.py"],
    ["bench/ingest.py"],
    ["bench/analytics.py"],
    ["bench/clickhouse.py"],
    ["bench/browser.py"],
    ["bench/memory.py"],
]


def machine() -> str:
    cpu = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()}"


def run(cmd: list[str]) -> list[dict]:
    script = ROOT / cmd[0]
    if not script.exists():
        return []
    print(f"== {' '.join(cmd)}", flush=True)
    proc = subprocess.run([sys.executable, *cmd, "--json"], cwd=ROOT, capture_output=True, text=True)
    sys.stderr.write(proc.stderr)
    rows = []
    for line in proc.stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            rows.append(json.loads(line))
            print("   ", _row_text(rows[-1]), flush=True)
    if proc.returncode and not rows:
        rows.append({"name": cmd[0], "skipped": f"failed with exit code {proc.returncode}"})
    return rows


def _row_text(row: dict) -> str:
    if row.get("skipped"):
        return f"{row['name']}: skipped ({row['skipped']})"
    return f"{row['name']}: {row['figure']} {row['unit']} vs {row['baseline_figure']} -> ratio {row['ratio']}"


def table(rows: list[dict], how: str = "`make bench`") -> str:
    today = dt.date.today().isoformat()
    lines = [
        f"Measured {today} on {machine()} by {how}.",
        "",
        "| Benchmark | Figure | Baseline (same run) | Ratio | Budget | Met |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        if row.get("skipped"):
            lines.append(f"| {row['name']} | skipped: {row['skipped']} | | | {row.get('budget', '')} | - |")
            continue
        lines.append(
            f"| {row['name']} | {row['figure']} {row['unit']} | {row['baseline']}: {row['baseline_figure']} | "
            f"{row['ratio']} | {row['budget']} | {'yes' if row['ok'] else '**no**'} |"
        )
    return "\n".join(lines)


def write(rows: list[dict], markers: tuple[str, str] = (BEGIN, END), how: str = "`make bench`") -> None:
    begin, end = markers
    text = DOC.read_text() if DOC.exists() else "# Performance\n"
    if begin not in text:
        text = text.replace(END, f"{END}\n\n{begin}\n{end}", 1) if END in text else f"{text}\n{begin}\n{end}\n"
    head, _, rest = text.partition(begin)
    _, _, tail = rest.partition(end)
    DOC.write_text(f"{head}{begin}\n{table(rows, how)}\n{end}{tail}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated script names (compute, decode, api, ingest, analytics, ...)")
    args = parser.parse_args()
    chosen = BENCHMARKS
    if args.only:
        names = set(args.only.split(","))
        chosen = [cmd for cmd in BENCHMARKS if Path(cmd[0]).stem in names]
    rows: list[dict] = []
    for cmd in chosen:
        rows.extend(run(cmd))
    if args.only:
        write(rows, PARTIAL, f"`bench/run_all.py --only {args.only}` (the table above keeps the last full run)")
    else:
        write(rows)
    print(f"wrote {DOC.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
