"""The exercise's README in Spanish and Simplified Chinese: the same commands and code as the
English one, made from its current text (a translation records the digest of the README.md it
was made from), and shipped in both downloads."""

from __future__ import annotations

import hashlib
import io
import re
import zipfile
from pathlib import Path

import pytest

EXERCISE = Path(__file__).resolve().parents[2] / "exercises" / "multi-head-attention"
FENCED = re.compile(r"```\w*\n(.*?)```", re.S)


@pytest.mark.parametrize("locale", ["es", "zh-CN"])
def test_a_translated_readme_keeps_every_command_and_was_made_from_the_current_english(locale):
    english = (EXERCISE / "README.md").read_text()
    translated = (EXERCISE / f"README.{locale}.md").read_text()
    assert FENCED.findall(translated) == FENCED.findall(english)  # the code blocks, character for character
    assert len(re.findall(r"^#+ ", translated, re.M)) == len(re.findall(r"^#+ ", english, re.M))
    recorded = re.match(r"<!-- source_sha256: ([0-9a-f]{64})", translated)
    assert recorded, "a translation says which README.md it was made from"
    assert recorded.group(1) == hashlib.sha256((EXERCISE / "README.md").read_bytes()).hexdigest(), (
        f"README.md changed after README.{locale}.md was made: translate the change"
    )


@pytest.mark.parametrize("track", ["python", "typescript"])
def test_both_downloads_carry_the_readme_in_every_language(client, track):
    archive = zipfile.ZipFile(io.BytesIO(client.get(f"/api/v1/exercises/multi-head-attention/{track}.zip").data))
    names = set(archive.namelist())
    for readme in ("README.md", "README.es.md", "README.zh-CN.md"):
        assert any(n.endswith("multi-head-attention/" + readme) for n in names), (track, readme)
