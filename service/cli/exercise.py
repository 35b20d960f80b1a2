"""`workbench exercise`: check a learner's file on fixed cases, answer a challenge with it, or trace
it beside the engine. `submit` and `trace` are the exercise's own scripts (the ones the lesson's
downloads hold), so a learner with the repository and one without run the same code; only the
learner's numbers ever go to the server.
"""

from __future__ import annotations

import importlib.util
import sys
from functools import cache

import click

from ..config import ROOT

EXERCISE_DIR = ROOT / "exercises" / "multi-head-attention"


@cache
def script(name: str):
    """The exercise's `name`.py, loaded from its folder (which it puts on sys.path for its own imports)."""
    path = EXERCISE_DIR / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"mha_exercise_{name}", path)
    if spec is None or spec.loader is None:
        raise click.ClickException(f"{path} is missing: is this a whole checkout?")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@click.group()
def exercise() -> None:
    """The lesson's exercise."""


@exercise.command("check")
@click.argument("path", default=str(EXERCISE_DIR / "starter.py"), type=click.Path(dir_okay=False))
def exercise_check(path: str) -> None:
    """Run PATH's multi_head_attention on several cases and name any known mistake."""
    import numpy as np

    from ..exercise.challenge import describe, new_cases
    from ..exercise.diagnose import diagnose

    learner = script("learner")
    workbench = [[1.0, 0.5, -0.5, 1.0], [0.2, 1.0, 1.5, -0.3], [-1.0, 0.3, 0.8, 0.6]]
    cases = [
        {"tokens": workbench, "heads": 2, "causal": True},
        {"tokens": workbench, "heads": 2, "causal": False},
        *new_cases(np.random.default_rng(7)),  # fixed seed: the same cases on every run
    ]
    try:
        function = learner.load(path)
    except learner.LearnerError as exc:
        raise click.ClickException(str(exc)) from None
    failures = 0
    for case in cases:
        title = describe(case)
        try:
            outputs = learner.call(function, case)
        except learner.LearnerError as exc:
            failures += 1
            click.echo(f"✗ {title}: {exc}")
            continue
        verdict = diagnose(
            case["tokens"], case["heads"], case["causal"], outputs, output_projection=case.get("output_projection")
        )
        failures += not verdict.correct
        mark = "✓" if verdict.correct else "✗"
        named = f" [{', '.join(verdict.mistakes)}]" if verdict.mistakes else ""
        click.echo(f"{mark} {title}:{named} {verdict.message}")
    click.echo(f"{len(cases) - failures} of {len(cases)} cases correct")
    sys.exit(1 if failures else 0)


@exercise.command("submit", context_settings={"ignore_unknown_options": True})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def exercise_submit(args: tuple[str, ...]) -> None:
    """Answer a challenge: PATH --challenge URL [--print] (the exercise's submit.py)."""
    sys.exit(script("submit").main(list(args)))


@exercise.command("trace", context_settings={"ignore_unknown_options": True})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def exercise_trace(args: tuple[str, ...]) -> None:
    """Your code beside the engine: PATH WORKBENCH_LINK [--json] [--open] (the exercise's trace.py)."""
    sys.exit(script("trace").main(list(args)))
