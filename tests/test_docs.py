"""The docs say what the code does, and cannot drift from it: every room of docs/architecture.md is in
the README's "What is here" and every module of the engine is named there; every route of a resource is
in its module's (or package's) docstring; every preset answers 200 on the endpoint it names; every
failure mode the engine computes is in docs/conventions.md; the CHANGELOG names every issue a commit
names, and has a section for the version being built. The pre-commit hook runs this file."""

from __future__ import annotations

import importlib
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from service.compute.failure_modes import REGISTRY
from service.presets import presets

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
ARCHITECTURE = (ROOT / "docs" / "architecture.md").read_text()
CHANGELOG = (ROOT / "CHANGELOG.md").read_text()


def section(text: str, heading: str) -> str:
    return text.split(heading, 1)[1].split("\n## ", 1)[0]


def first_column_paths(table: str) -> set[str]:
    """The backticked paths in a Markdown table's first column, without a trailing slash."""
    found = set()
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[0].startswith("`"):
            found |= {p.rstrip("/") for p in re.findall(r"`([^`]+)`", cells[0])}
    return found


def test_every_room_of_the_architecture_is_in_the_readmes_what_is_here():
    rooms = first_column_paths(section(ARCHITECTURE, "## The rooms"))
    assert len(rooms) > 15
    assert sorted(rooms - first_column_paths(section(README, "## What is here"))) == []


def test_every_module_of_the_engine_is_named_in_the_readme():
    row = next(
        line for line in section(README, "## What is here").splitlines() if line.startswith("| `service/compute/`")
    )
    modules = {p.name for p in (ROOT / "service" / "compute").glob("*.py")} - {"__init__.py"}
    assert sorted(m for m in modules if f"`{m}`" not in row) == []


def api_routes(database: Path) -> dict[str, list[str]]:
    """Each resource's module (its package, for a package of the API) -> its routes' paths, `{name}` for a
    path parameter, without the /api/v1 prefix."""
    from service.app import create_app

    app = create_app({"env": "testing", "database_url": f"sqlite:///{database}", "ratelimit_enabled": False})
    found: dict[str, list[str]] = {}
    for rule in app.url_map.iter_rules():
        blueprint = app.blueprints.get(rule.endpoint.split(".")[0])
        if blueprint is None or not blueprint.import_name.startswith("service.api"):
            continue
        module = blueprint.import_name
        if module.count(".") > 2:  # service.api.attention.views: the attention package says it
            module = module.rsplit(".", 1)[0]
        path = re.sub(r"<(?:[^:>]+:)?([^>]+)>", r"{\1}", rule.rule).removeprefix("/api/v1")
        found.setdefault(module, []).append(path)
    return found


def named(path: str, text: str) -> bool:
    """`path` in `text`, any name for each of its parameters (`{lesson_id}` is `{lesson}` there)."""
    pattern = re.escape(path)
    pattern = re.sub(r"\\\{[^}]*\\\}", r"\\{[^}]+\\}", pattern)
    return re.search(pattern + r"(?![\w/])", text) is not None


def test_every_route_of_a_resource_is_in_its_docstring(tmp_path):
    routes = api_routes(tmp_path / "routes.db")
    assert "service.api.attention" in routes and len(routes) > 10
    for module, paths in routes.items():
        doc = importlib.import_module(module).__doc__ or ""
        assert [p for p in paths if not named(p, doc)] == [], module


def test_a_route_missing_from_a_docstring_would_be_found():
    assert named("/lessons/{lesson_id}", "`GET /lessons/{id}`: one lesson")
    assert not named("/attention/decode", "`POST /attention` and `/attention/compare`")
    assert not named("/attention", "`POST /attention/compare`")


def test_every_preset_answers_200_on_the_endpoint_it_names(client):
    for name, preset in presets().items():
        method, path = preset["endpoint"].split()
        assert method == "POST", name
        answer = client.post(path, json=preset["request"])
        assert answer.status_code == 200, (name, answer.get_json())
    listed = client.get("/api/v1/presets").get_json()["presets"]
    assert {p["id"]: p["endpoint"] for p in listed} == {n: p["endpoint"] for n, p in presets().items()}
    row = next(line for line in README.splitlines() if line.startswith("| `GET /api/v1/presets`"))
    assert [n for n in presets() if f"`{n}`" not in row] == []  # the README's presets row names every one


def test_every_failure_mode_the_engine_computes_is_in_the_conventions():
    conventions = (ROOT / "docs" / "conventions.md").read_text()
    assert sorted(m for m, f in REGISTRY.items() if f.engine and f"| `{m}` |" not in conventions) == []


def commit_messages() -> str:
    git = shutil.which("git")
    if git is None or not (ROOT / ".git").exists():
        pytest.skip("the CHANGELOG is checked against the history: no git history here")
    done = subprocess.run([git, "log", "--format=%s%n%b"], cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"git log failed: {done.stderr.strip()}")
    return done.stdout


def test_the_changelog_names_every_issue_a_commit_names():
    """A release's changes are in the CHANGELOG: every issue a commit says it works on has its entry."""
    issues = {int(n) for n in re.findall(r"\bissue (\d+)\b", commit_messages())}
    assert issues, "no commit names an issue"
    assert sorted(n for n in issues if not re.search(rf"\bissue {n}\b", CHANGELOG)) == []


def test_the_changelog_has_a_section_for_the_version_being_built():
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    released = re.findall(r"^## (\d+\.\d+\.\d+) ", CHANGELOG, flags=re.M)
    if ".dev" in version:
        assert CHANGELOG.split("\n## ", 2)[1].startswith("Unreleased"), "the newest section is the one being built"
        assert version.split(".dev")[0] not in released  # not released yet
    else:
        assert version in released
    for release in re.split(r"^## ", CHANGELOG, flags=re.M)[1:]:
        if re.match(r"\d+\.\d+\.\d+ |Unreleased", release):
            assert "\n- " in release, release.splitlines()[0]  # every release says what changed
