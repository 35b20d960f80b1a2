"""Lighthouse on every page, at desktop and at mobile settings: accessibility, best practices,
performance, layout shift and console errors, against the budgets (accessibility 100, best
practices 100, performance >= 95, CLS < 0.1, no console errors).

Lighthouse 12.2.3 (pinned in bench/lighthouse/package.json: 13.x wants Node 22) drives Debian's
chromium against a gunicorn on loopback. `--write` puts the table into docs/performance.md.

    (cd bench/lighthouse && npm ci) && python bench/lighthouse.py [--write | --page NAME ...] [--json]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.common import Gunicorn  # noqa: E402
from bench.run_all import machine  # noqa: E402
from service.db.migrate import upgrade  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LIGHTHOUSE = ROOT / "bench" / "lighthouse" / "node_modules" / ".bin" / "lighthouse"
CHROMIUM = "/usr/bin/chromium"
DOC = ROOT / "docs" / "performance.md"
BEGIN, END = "<!-- lighthouse:begin -->", "<!-- lighthouse:end -->"
PAGES = {
    "lessons": "/",
    "lesson": "/lessons/multi-head-attention",
    "workbench": "/explorables/multi-head-attention",
    "four heads": "/figures/four-heads",
    "trained heads": "/explorables/trained-heads",
    "kv cache": "/explorables/kv-cache",
    "case study lesson": "/lessons/kv-cache-and-latent-attention",
    "online softmax": "/explorables/online-softmax",
    "online softmax lesson": "/lessons/online-softmax",
    "long-context lesson": "/lessons/long-context",
    "rope scaling": "/explorables/rope-scaling",
    "rope scaling lesson": "/lessons/rope-scaling",
    "inside the model": "/explorables/inside-the-model",
    "inside the model lesson": "/lessons/inside-the-model",
    "speculative decoding": "/explorables/speculative-decoding",
    "speculative decoding lesson": "/lessons/speculative-decoding",
    "dashboard": "/dashboard",
    "API reference": "/api/docs",
}
# Measured for the record, not held to the budgets: Swagger UI's own page (its 1.4 MB bundle and
# its markup are the dependency's; docs/decisions.md, "The API reference and the console").
THIRD_PARTY = {"API console (Swagger UI)": "/api/docs/try"}
SIZES = {"desktop": ["--preset=desktop"], "mobile": []}  # mobile: Lighthouse's default (a throttled phone)
RUNS = {"desktop": 1, "mobile": 3}  # the median of three on the throttled phone, whose score varies most


def report_of(url: str, flags: list[str], attempts: int = 3) -> dict:
    """Lighthouse's JSON report; a run that fails to record its trace (NO_NAVSTART, seen here
    about one run in ten) is run again."""
    for _ in range(attempts):
        with tempfile.NamedTemporaryFile(suffix=".json") as out:
            done = subprocess.run(
                [
                    str(LIGHTHOUSE),
                    url,
                    "--quiet",
                    "--output=json",
                    f"--output-path={out.name}",
                    "--chrome-flags=--headless=new --no-sandbox --disable-gpu",
                    *flags,
                ],
                env={"CHROME_PATH": CHROMIUM, "PATH": "/usr/bin:/bin"},
                timeout=180,
                capture_output=True,
                text=True,
            )
            if done.returncode == 0:
                return json.loads(Path(out.name).read_text())
    raise RuntimeError(f"Lighthouse failed {attempts} times on {url}: {done.stderr[-500:]}")


def audit(url: str, flags: list[str]) -> dict:
    report = report_of(url, flags)
    scores = {k: round(100 * (v["score"] or 0)) for k, v in report["categories"].items()}
    errors = report["audits"]["errors-in-console"]["details"]["items"]
    return {
        "accessibility": scores["accessibility"],
        "best_practices": scores["best-practices"],
        "performance": scores["performance"],
        "cls": round(report["audits"]["cumulative-layout-shift"]["numericValue"], 3),
        "console_errors": [e.get("description") or e.get("source") for e in errors],
    }


def median_audit(url: str, flags: list[str], runs: int) -> dict:
    """The run with the median performance score of `runs` (Lighthouse's own advice for its
    variability: a throttled phone's score moves by several points between runs on one machine)."""
    results = sorted((audit(url, flags) for _ in range(runs)), key=lambda r: r["performance"])
    return {**results[len(results) // 2], "runs": [r["performance"] for r in results]}


def within(row: dict) -> bool:
    return (
        row["accessibility"] == 100
        and row["best_practices"] == 100
        and row["performance"] >= 95
        and row["cls"] < 0.1
        and not row["console_errors"]
    )


def run(only: list[str] | None = None) -> list[dict]:
    name = "Lighthouse"
    if not (LIGHTHOUSE.exists() and Path(CHROMIUM).exists()):
        return [{"name": name, "skipped": "needs bench/lighthouse (npm ci there) and Debian's chromium"}]
    url = f"sqlite:///{Path(tempfile.mkdtemp()) / 'lh.db'}"
    upgrade(url)
    rows = []
    with Gunicorn(
        "service.app:create_app()", {"WORKBENCH_DATABASE_URL": url, "WORKBENCH_RATELIMIT_ENABLED": "0"}
    ) as app:
        for page, path in {**PAGES, **THIRD_PARTY}.items():
            if only and page not in only:
                continue
            for size, flags in SIZES.items():
                result = median_audit(app.url + path, flags, RUNS[size] if page in PAGES else 1)
                rows.append(
                    {
                        "name": f"Lighthouse, {page}, {size}",
                        "page": page,
                        "size": size,
                        **result,
                        "ok": within(result) if page in PAGES else None,
                    }
                )
    return rows


def table(rows: list[dict]) -> str:
    lines = [
        f"Measured {dt.date.today().isoformat()} on {machine()}; Lighthouse 12.2.3, Debian's chromium; "
        "desktop: `--preset=desktop`, one run; mobile: Lighthouse's default (a throttled phone), the run with the "
        "median performance of three (the three in brackets). Budgets: accessibility "
        "100, best practices 100, performance >= 95, CLS < 0.1, no console errors.",
        "",
        "| page | size | accessibility | best practices | performance | CLS | console errors | within |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "skipped" in r:
            return f"Skipped: {r['skipped']}."
        errors = "; ".join(r["console_errors"]) or "none"
        lines.append(
            f"| {r['page']} | {r['size']} | {r['accessibility']} | {r['best_practices']} | {r['performance']}"
            f"{' (' + ', '.join(map(str, r['runs'])) + ')' if len(r.get('runs', [])) > 1 else ''} | "
            f"{r['cls']} | {errors} | {'not budgeted' if r['ok'] is None else 'yes' if r['ok'] else 'no'} |"
        )
    return "\n".join(lines)


def write(rows: list[dict]) -> None:
    text = DOC.read_text()
    block = f"{BEGIN}\n{table(rows)}\n{END}"
    if BEGIN in text:
        text = text[: text.index(BEGIN)] + block + text[text.index(END) + len(END) :]
    else:
        text += f"\n## Lighthouse: every page\n\n{block}\n"
    DOC.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--write", action="store_true", help="put the table into docs/performance.md")
    parser.add_argument("--page", action="append", choices=sorted(PAGES), help="only these pages (not with --write)")
    args = parser.parse_args()
    if args.write and args.page:
        parser.error("--write replaces the table of every page: run them all")
    rows = run(args.page)
    for row in rows:
        print(json.dumps(row) if args.json else f"{row['name']}: {row}", flush=True)
    if args.write:
        write(rows)


if __name__ == "__main__":
    main()
