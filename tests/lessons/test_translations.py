"""Translated lessons: each keeps the English lesson's ids, rules and directives, says which
English text it was made from, and is flagged when that text has changed since. A translation
that does not fit is left out, so the English lesson is served: a page, never a broken one."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from service.i18n import LOCALES
from service.lessons.loader import load_lessons
from service.lessons.translations import load_translations, source_digest, stale_translations, structure

CONTENT = Path(__file__).resolve().parents[2] / "content" / "lessons"


def test_every_lesson_is_translated_into_every_offered_language_with_its_structure():
    lessons = load_lessons(CONTENT)
    translations, problems = load_translations(CONTENT, lessons)
    assert problems == []
    for lesson_id, lesson in lessons.items():
        for locale in set(LOCALES) - {"en"}:
            translated = translations[lesson_id][locale]
            assert translated.locale == locale and structure(translated) == structure(lesson)
            assert translated.title != lesson.title and translated.html != lesson.html


def test_no_translation_is_behind_its_english_source():
    """Edit an English lesson and this fails until each translation is brought up to date and
    its `source_sha256` set to the English file's new digest (README, "Languages")."""
    assert stale_translations(CONTENT, load_lessons(CONTENT)) == []


def copy_content(tmp_path: Path) -> Path:
    target = tmp_path / "lessons"
    shutil.copytree(CONTENT, target)
    return target


def test_a_changed_english_source_flags_its_translations(tmp_path):
    content = copy_content(tmp_path)
    english = content / "multi-head-attention.md"
    english.write_text(english.read_text().replace("The previous lesson", "The lesson before"))
    stale = stale_translations(content, load_lessons(content))
    assert len(stale) == len(LOCALES) - 1 and all(source_digest(english)[:12] in s for s in stale)


def test_a_translation_that_changes_a_checkpoint_is_left_out_and_english_is_served(tmp_path):
    content = copy_content(tmp_path)
    spanish = content / "es" / "multi-head-attention.md"
    spanish.write_text(
        spanish.read_text().replace(':::explain{checkpoint="explain"}', ':::explain{checkpoint="predict"}')
    )
    translations, problems = load_translations(content, load_lessons(content))
    assert "es" not in translations["multi-head-attention"] and "zh-CN" in translations["multi-head-attention"]
    assert len(problems) == 1 and "es/multi-head-attention.md" in problems[0]


def test_a_missing_translation_falls_back_to_english(tmp_path):
    content = copy_content(tmp_path)
    (content / "zh-CN" / "multi-head-attention.md").unlink()
    translations, problems = load_translations(content, load_lessons(content))
    assert problems == [] and set(translations["multi-head-attention"]) == {"es"}
    from service.app import create_app

    app = create_app({"env": "testing", "database_url": f"sqlite:///{tmp_path / 'x.db'}", "content_dir": str(content)})
    lesson = app.test_client().get("/api/v1/lessons/multi-head-attention?lang=zh-CN")
    assert lesson.json["locale"] == "en" and lesson.headers["Content-Language"] == "en"


# Chinese sets no space between its characters: neither after full-width punctuation nor where the source
# broke a line (a newline between two characters is drawn as a space by every browser but Firefox).
CJK = "[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]"
INLINE = r"(?:</?(?:em|strong|a|code|sub|span)\b[^>]*>)*"  # within a paragraph: a block's end is a break
SPACED = re.compile(rf"{CJK}{INLINE}\s+{INLINE}{CJK}")


def test_chinese_lessons_set_no_space_between_characters_and_english_keeps_its_spaces():
    """Issue 65, K6: the rendered Chinese lessons, every line of their source joined as Chinese is set; the
    failure-mode lists with a full-width colon and stop; English words still apart across a line break."""
    lessons = load_lessons("content/lessons")
    translations, _ = load_translations("content/lessons", lessons)
    for lesson_id, by_locale in translations.items():
        translated = by_locale["zh-CN"]
        assert SPACED.findall(translated.html) == [], lesson_id
        if "failure-modes" in translated.html:
            assert "</a>：" in translated.html and "</a>: " not in translated.html, lesson_id
    english = lessons["long-context"].html
    assert "\n" in english and "bounds the cache at <em>W</em> positions per layer, a rolling buffer" in english
