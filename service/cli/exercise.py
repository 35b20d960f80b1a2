"""`workbench exercise`: check a learner's file on fixed cases, or answer a challenge with it.

The learner's code runs here, on their machine (service/learner_code.py); only its numbers
go to the server.
"""

from __future__ import annotations

import sys

import click


@click.group()
def exercise() -> None:
    """The lesson's exercise."""


@exercise.command("check")
@click.argument(
    "path", default="exercises/multi-head-attention/starter.py", type=click.Path(exists=True, dir_okay=False)
)
def exercise_check(path: str) -> None:
    """Run PATH's multi_head_attention on several cases and name any known mistake."""
    import numpy as np

    from ..compute.challenge import describe, new_cases
    from ..compute.diagnose import diagnose
    from ..learner_code import LearnerCodeError

    workbench = [[1.0, 0.5, -0.5, 1.0], [0.2, 1.0, 1.5, -0.3], [-1.0, 0.3, 0.8, 0.6]]
    cases = [
        {"tokens": workbench, "heads": 2, "causal": True},
        {"tokens": workbench, "heads": 2, "causal": False},
        *new_cases(np.random.default_rng(7)),  # fixed seed: the same cases on every run
    ]
    function = _learner_function(path)
    failures = 0
    for case in cases:
        title = describe(case)
        try:
            verdict = diagnose(
                case["tokens"],
                case["heads"],
                case["causal"],
                _learner_outputs(function, case),
                output_projection=case.get("output_projection"),
            )
        except LearnerCodeError as exc:
            failures += 1
            click.echo(f"✗ {title}: {exc}")
            continue
        failures += not verdict.correct
        mark = "✓" if verdict.correct else "✗"
        named = f" [{', '.join(verdict.mistakes)}]" if verdict.mistakes else ""
        click.echo(f"{mark} {title}:{named} {verdict.message}")
    click.echo(f"{len(cases) - failures} of {len(cases)} cases correct")
    sys.exit(1 if failures else 0)


@exercise.command("submit")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--challenge",
    "source",
    required=True,
    help="the challenge's URL (the lesson page shows the whole command) or a challenge JSON file",
)
@click.option("--print", "print_only", is_flag=True, help="print the answers as JSON (for the lesson's paste box)")
def exercise_submit(path: str, source: str, print_only: bool) -> None:
    """Answer a challenge with PATH's multi_head_attention; the server checks the numbers."""
    import json

    from ..learner_code import LearnerCodeError, to_json

    challenge = _read_challenge(source)
    function = _learner_function(path)
    answers = []
    for i, case in enumerate(challenge["cases"]):
        try:
            outputs = _learner_outputs(function, case)
        except LearnerCodeError as exc:
            raise click.ClickException(f"case {i + 1}: {exc}") from None
        missing = {"weights", "head_outputs", "concatenated", "output"} - set(outputs)
        if missing:
            raise click.ClickException(f"case {i + 1}: the result is missing {sorted(missing)}")
        answers.append({part: to_json(values) for part, values in outputs.items()})
    body = {"challenge": challenge["id"], "answers": answers}
    if print_only:
        click.echo(json.dumps(body, separators=(",", ":")))
        return
    result = _post_answers(challenge["answers_url"], {"answers": answers})
    for case in result["cases"]:
        mark = "✓" if case["correct"] else "✗"
        named = f" [{', '.join(case['mistakes'])}]" if case["mistakes"] else ""
        click.echo(f"{mark} case {case['case']}:{named} {case['message']}")
    click.echo(result["message"])
    if result["correct"]:
        click.echo("The implement checkpoint is complete: the lesson page shows it.")
    sys.exit(0 if result["correct"] else 1)


def _learner_function(path: str):
    from ..learner_code import LearnerCodeError, load

    try:
        return load(path)
    except LearnerCodeError as exc:
        raise click.ClickException(str(exc)) from None


def _learner_outputs(function, case):
    from ..learner_code import run

    return run(function, case)


def _read_challenge(source: str) -> dict:
    import json

    import requests

    if source.startswith(("http://", "https://")):
        try:
            response = requests.get(source, headers={"Accept": "application/json"}, timeout=30)
        except requests.RequestException as exc:
            raise click.ClickException(f"could not reach {source}: {exc}") from None
        if response.status_code != 200:
            raise click.ClickException(f"{source} answered {response.status_code}: {_problem_detail(response)}")
        challenge = response.json()
    else:
        try:
            challenge = json.loads(open(source, encoding="utf-8").read())
        except (OSError, ValueError) as exc:
            raise click.ClickException(f"could not read the challenge from {source}: {exc}") from None
    if challenge.get("status") == "solved":
        raise click.ClickException("this challenge is already solved; ask the lesson page for a new one")
    if challenge.get("status") == "expired":
        raise click.ClickException("this challenge has expired; ask the lesson page for a new one")
    if not isinstance(challenge.get("cases"), list) or "answers_url" not in challenge:
        raise click.ClickException(f"{source} is not a challenge (no cases or answers_url)")
    return challenge


def _post_answers(url: str, body: dict) -> dict:
    import requests

    try:
        response = requests.post(url, json=body, headers={"Accept": "application/json"}, timeout=30)
    except requests.RequestException as exc:
        raise click.ClickException(
            f"could not reach {url}: {exc}. Run again with --print and paste the output into the lesson page."
        ) from None
    if response.status_code != 200:
        raise click.ClickException(f"the server answered {response.status_code}: {_problem_detail(response)}")
    return response.json()


def _problem_detail(response) -> str:
    try:
        return response.json().get("detail", response.text[:200])
    except ValueError:
        return response.text[:200]
