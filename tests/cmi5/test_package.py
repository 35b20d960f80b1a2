"""`workbench cmi5 package`: a zip an LMS imports, whose cmi5.xml declares the course structure
(the cmi5 course structure namespace): one course, one assignable unit per lesson with its id, its
titles and descriptions in the three languages, its launch URL on this service, moveOn,
masteryScore and launchMethod. The lessons and their translations are read from the content files,
not from the code that writes the package."""

from __future__ import annotations

import xml.etree.ElementTree as ET
import zipfile

import pytest
import yaml
from click.testing import CliRunner

from service.cli import main

NS = {"c": "https://w3id.org/xapi/profiles/cmi5/v1/CourseStructure.xsd"}
SITE = "https://workbench.example.org"
MOVE_ON = ("CompletedAndPassed", "Completed", "Passed", "CompletedOrPassed", "NotApplicable")


def front_matter(path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8").split("---")[1])


def lessons_on_disk() -> dict[str, dict]:
    """Each lesson's front matter, with its translations' titles by language tag."""
    from pathlib import Path

    found = {}
    for path in sorted(Path("content/lessons").glob("*.md")):
        lesson = front_matter(path)
        lesson["titles"] = {"en-US": lesson["title"]}
        for tag in ("es", "zh-CN"):
            translated = Path("content/lessons") / tag / path.name
            if translated.exists():
                lesson["titles"][tag] = front_matter(translated)["title"]
        found[lesson["id"]] = lesson
    return found


def package(tmp_path, monkeypatch, *options) -> ET.Element:
    monkeypatch.setenv("WORKBENCH_PUBLIC_URL", SITE)
    out = tmp_path / "course.zip"
    result = CliRunner().invoke(main, ["cmi5", "package", "--out", str(out), *options])
    assert result.exit_code == 0, result.output
    with zipfile.ZipFile(out) as archive:
        assert archive.namelist() == ["cmi5.xml"]
        return ET.fromstring(archive.read("cmi5.xml"))


def scored(lesson: dict) -> bool:
    return any(item.get("phase") in ("post", "both") for item in lesson.get("items", []))


def test_the_package_declares_one_course_and_one_unit_per_lesson(tmp_path, monkeypatch):
    root = package(tmp_path, monkeypatch)
    assert root.tag == f"{{{NS['c']}}}courseStructure"
    course = root.find("c:course", NS)
    assert course.get("id").startswith("https://") and course.find("c:title/c:langstring", NS).text
    lessons = lessons_on_disk()
    units = root.findall("c:au", NS)
    assert sorted(u.get("id").rsplit("/", 1)[1] for u in units) == sorted(lessons)
    assert len({u.get("id") for u in units}) == len(units)
    for unit in units:
        lesson = lessons[unit.get("id").rsplit("/", 1)[1]]
        assert unit.find("c:url", NS).text == f"{SITE}/lessons/{lesson['id']}"
        titles = {s.get("lang"): s.text for s in unit.findall("c:title/c:langstring", NS)}
        assert titles == lesson["titles"] and set(titles) == {"en-US", "es", "zh-CN"}
        descriptions = unit.findall("c:description/c:langstring", NS)
        assert descriptions[0].text == lesson["summary"] and len(descriptions) == 3
        assert unit.get("launchMethod") == "OwnWindow"
        # a unit that cannot be passed (no questions after its explorable) waits for its completion only
        assert unit.get("moveOn") == ("CompletedAndPassed" if scored(lesson) else "Completed")
        assert unit.get("masteryScore") == ("0.8" if scored(lesson) else None)


@pytest.mark.parametrize("move_on", MOVE_ON)
def test_move_on_and_the_mastery_score_are_options(tmp_path, monkeypatch, move_on):
    root = package(tmp_path, monkeypatch, "--move-on", move_on, "--mastery-score", "0.75")
    lessons = lessons_on_disk()
    for unit in root.findall("c:au", NS):
        lesson = lessons[unit.get("id").rsplit("/", 1)[1]]
        cannot_pass = not scored(lesson) and move_on in ("CompletedAndPassed", "Passed")
        assert unit.get("moveOn") == ("Completed" if cannot_pass else move_on)
        assert unit.get("masteryScore") in (("0.75",) if scored(lesson) else (None,))


def test_no_mastery_score_leaves_it_to_the_unit(tmp_path, monkeypatch):
    root = package(tmp_path, monkeypatch, "--mastery-score", "none")
    assert all(unit.get("masteryScore") is None for unit in root.findall("c:au", NS))


@pytest.mark.parametrize("bad", ["1.5", "-0.1", "most"])
def test_a_mastery_score_outside_zero_to_one_is_refused(tmp_path, monkeypatch, bad):
    result = CliRunner().invoke(main, ["cmi5", "package", "--out", str(tmp_path / "c.zip"), "--mastery-score", bad])
    assert result.exit_code == 2 and "a decimal from 0 to 1" in result.output
    assert not (tmp_path / "c.zip").exists()
