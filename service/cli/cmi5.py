"""`workbench cmi5`: the course as a cmi5 package an LMS imports (docs/cmi5.md)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import click

from .common import _settings


def _mastery(value: str) -> float | None:
    if value == "none":
        return None
    try:
        score = float(value)
    except ValueError:
        raise click.BadParameter(f"a decimal from 0 to 1, or none; got {value!r}") from None
    if not 0 <= score <= 1:
        raise click.BadParameter(f"a decimal from 0 to 1, or none; got {value!r}")
    return score


@click.group()
def cmi5() -> None:
    """The lessons as cmi5 assignable units."""


@cmi5.command("package")
@click.option(
    "--out", type=click.Path(dir_okay=False, path_type=Path), default="attention-course.zip", show_default=True
)
@click.option(
    "--move-on",
    type=click.Choice(["CompletedAndPassed", "Completed", "Passed", "CompletedOrPassed", "NotApplicable"]),
    default="CompletedAndPassed",
    show_default=True,
    help="When the LMS lets the learner move on from a lesson.",
)
@click.option(
    "--mastery-score",
    default="0.8",
    show_default=True,
    help="The share of a lesson's after-items to answer right to pass (0 to 1), or none to leave it to the unit.",
)
def package(out: Path, move_on: str, mastery_score: str) -> None:
    """Write the course package: a zip holding cmi5.xml, one assignable unit per lesson, launched on this
    service's public URL (WORKBENCH_PUBLIC_URL)."""
    from ..lessons import load_catalog
    from ..xapi.cmi5 import course_structure

    settings = _settings()
    lessons = list(load_catalog(settings.content_dir).values())
    xml = course_structure(lessons, settings.activity_base, settings.public_base, move_on, _mastery(mastery_score))
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("cmi5.xml", xml)
    click.echo(f"wrote {out}: {len(lessons)} assignable units launched at {settings.public_base}/lessons/")
