"""The gettext catalogs: every string a learner reads is extracted, translated in every locale
with its placeholders intact, and compiled; the pseudo-locale is accented and longer."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from service.i18n import LOCALES, PSEUDO
from service.i18n_catalogs import FRONTEND_CATALOGS, check, extract, pseudo, source_key

ROOT = Path(__file__).resolve().parents[1]
LITERAL = re.compile(r"""\b(?:t|tn|N_)\(\s*"((?:[^"\\]|\\.)*)\"""")


def test_every_message_exists_in_every_catalog_translated_and_compiled():
    """`make i18n` leaves nothing to report: no string missing, untranslated or fuzzy in any
    locale, no placeholder or markup lost, every .mo and JSON compiled from its .po."""
    assert [str(f) for f in check()] == []


def test_every_string_the_scripts_translate_is_in_the_catalogs():
    """A t() the extractor cannot see (nested in another call's arguments, or in a template
    literal) would stay English in every language: each literal must reach the template."""
    known = {source_key(m) for m in extract() if m.id}
    unseen = [
        (path.name, text)
        for path in sorted((ROOT / "frontend" / "js").rglob("*.js"))
        for text in LITERAL.findall(path.read_text())
        if text not in known
    ]
    assert unseen == []


@pytest.mark.parametrize("tag", [tag for tag in LOCALES if tag != "en"] + [PSEUDO])
def test_each_page_has_a_catalog_of_its_own_scripts_strings_in_each_language(tag):
    """A page downloads the words its modules show, not every page's: the workbench's replay is in
    the workbench's catalog and not the lesson's (which embeds the workbench in a frame)."""
    workbench, lesson = (
        json.loads((FRONTEND_CATALOGS / tag / f"{p}.json").read_text()) for p in ("workbench", "lesson")
    )
    assert workbench["locale"] == tag and workbench["plural_categories"][-1] == "other"
    replay = "Replay: head {head}, query {query}, key {key}"
    assert workbench["messages"][replay] not in ("", replay) and replay not in lesson["messages"]
    assert lesson["messages"]["Record prediction"] != "Record prediction"
    assert "Lessons on multi-head attention" not in " ".join(map(str, lesson["messages"]))  # a template's string


def test_the_pseudo_locale_is_accented_bracketed_about_a_third_longer_and_keeps_placeholders():
    english = "Replay head {head}, query {query}, key {key}: weight {weight}"
    text = pseudo(english)
    assert text.startswith("⟦") and text.endswith("⟧")
    assert re.findall(r"\{\w+\}", text) == ["{head}", "{query}", "{key}", "{weight}"]
    assert not re.search(r"[aeiou]", re.sub(r"\{\w+\}", "", text))  # every plain vowel accented
    assert 1.3 <= len(text) / len(english) <= 1.5
    marked = pseudo("A key with the %(scope)s scope shows <strong>learners</strong> only.")
    assert "%(scope)s" in marked and "<strong>" in marked and "</strong>" in marked
