"""The gettext catalogs: extract, update, pseudo-translate, compile, check (`make i18n`).

One template (`service/translations/messages.pot`) holds every string a learner reads: the pages'
templates (`_()`), the scripts' (`t()`, `tn()`) and the server's problem details (`N_()`,
`gettext()`). Each locale has its `.po`, compiled twice: `.mo` for the server (Flask-Babel) and
`frontend/i18n/<locale>/<page>.json` for the scripts (each page: its module graph's strings), all committed, so
nothing is built at run time. The pseudo-locale's `.po` is written from the template.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from babel import Locale
from babel.messages.catalog import Catalog, Message
from babel.messages.extract import extract_from_dir
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po, write_po

from .config import ROOT
from .i18n import DEFAULT, LOCALES, PSEUDO, TRANSLATIONS, babel_name

TEMPLATE = TRANSLATIONS / "messages.pot"
FRONTEND_CATALOGS = ROOT / "frontend" / "i18n"
TRANSLATED = [tag for tag in LOCALES if tag != DEFAULT]  # translators' catalogs
EVERY = [*TRANSLATED, PSEUDO]  # every compiled catalog
FIXED_DATE = datetime(2026, 1, 1, tzinfo=UTC)  # headers that do not change on every run
# (directory under ROOT, method, keywords): the scripts call t() and tn(); the server gettext
EXTRACTORS = [
    ("frontend/pages", "jinja2.ext:babel_extract", {"_": None, "gettext": None, "ngettext": (1, 2)}),
    ("frontend/js", "javascript", {"t": None, "tn": (1, 2), "N_": None}),
    ("service", "python", {"_": None, "gettext": None, "ngettext": (1, 2), "N_": None, "lazy_gettext": None}),
]
PLACEHOLDER = re.compile(r"\{\w+\}|%\(\w+\)[sd]|<[^>]+>|&\w+;")  # kept by translations, and by the pseudo-locale


def forms(value: object) -> tuple[str, ...]:
    """A message's id or string as its forms: one, or a plural's several."""
    if isinstance(value, (tuple, list)):
        return tuple(str(v or "") for v in value)
    return (str(value or ""),)


def source_key(message: Message) -> str:
    return forms(message.id)[0]


# -- extract -------------------------------------------------------------------------------


def extract() -> Catalog:
    """Every marked string in the pages, scripts and server, with the files it is in."""
    catalog = Catalog(project="attention-workbench", creation_date=FIXED_DATE, revision_date=FIXED_DATE)
    for folder, method, keywords in EXTRACTORS:
        pattern = "**.html" if "jinja" in method else "**.js" if method == "javascript" else "**.py"
        options = {pattern: {"trimmed": "true"}} if "jinja" in method else {}
        found = extract_from_dir(
            ROOT / folder,
            [(pattern, method)],
            options,
            keywords=keywords,
            comment_tags=("Translators:",),
            strip_comment_tags=True,
        )
        for filename, _lineno, message, comments, context in found:
            catalog.add(message, locations=[(f"{folder}/{filename}", 0)], auto_comments=comments, context=context)
    return catalog


# -- pseudo-locale -------------------------------------------------------------------------

ACCENTED = dict(zip("aceilnorstuyzACEILNORSTUYZ", "àçéîłñöŕšţûýžÀÇÉÎŁÑÖŔŠŢÛÝŽ", strict=True))
PADDING = "ƥàðð ĩñĝ ƒîłł ëŕ ŵöŕð ţéxţ ļöñĝ ēŕ ŝţŕî ñĝş".split()


def pseudo(text: str) -> str:
    """Accented, bracketed and about 35 % longer, placeholders kept: `Show {n}` -> `⟦Šĥöŵ {n} ƥàðð⟧`."""
    if not text:
        return text
    pieces = PLACEHOLDER.split(text)
    kept = PLACEHOLDER.findall(text)
    accented = "".join(
        "".join(ACCENTED.get(c, c) for c in piece) + (kept[k] if k < len(kept) else "")
        for k, piece in enumerate(pieces)
    )
    extra, words = round(0.35 * len(text)), list[str]()
    while sum(len(w) + 1 for w in words) < extra:
        words.append(PADDING[len(words) % len(PADDING)])
    return f"⟦{accented}{' ' + ' '.join(words) if words else ''}⟧"


def pseudo_catalog(template: Catalog) -> Catalog:
    catalog = Catalog(
        locale=babel_name(PSEUDO), project=template.project, creation_date=FIXED_DATE, revision_date=FIXED_DATE
    )
    for message in template:
        if not message.id:
            continue
        text = (
            tuple(pseudo(m) for m in forms(message.id))
            if isinstance(message.id, tuple)
            else pseudo(source_key(message))
        )
        catalog.add(message.id, text, locations=message.locations, context=message.context)
    return catalog


# -- files ---------------------------------------------------------------------------------


def po_path(locale: str) -> Path:
    return TRANSLATIONS / babel_name(locale) / "LC_MESSAGES" / "messages.po"


def read(path: Path, locale: str | None = None) -> Catalog:
    with path.open("rb") as f:
        return read_po(f, locale=locale)


def po_bytes(catalog: Catalog) -> bytes:
    out = io.BytesIO()
    write_po(out, catalog, width=100, sort_output=True, ignore_obsolete=True, include_lineno=False)
    return out.getvalue()


def mo_bytes(catalog: Catalog) -> bytes:
    out = io.BytesIO()
    write_mo(out, catalog)
    return out.getvalue()


PAGE_SCRIPTS = ROOT / "frontend" / "js" / "pages"
IMPORT = re.compile(r"""from\s*["'](\.{1,2}/[^"']+)["']|import\(\s*["'](\.{1,2}/[^"']+)["']""")


def module_graph(module: Path, seen: set[Path] | None = None, dynamic: bool = True) -> set[Path]:
    """`module` and every module it imports, statically or (unless `dynamic` is false) dynamically
    (relative paths)."""
    seen = set() if seen is None else seen
    if module not in seen:
        seen.add(module)
        for static, later in IMPORT.findall(module.read_text()):
            if static or dynamic:
                module_graph((module.parent / (static or later)).resolve(), seen, dynamic)
    return seen


def page_modules() -> dict[str, set[str]]:
    """Each page's script (frontend/js/pages/<page>.js) -> the files of its module graph, as the
    catalogs name them: a page's catalog holds only the strings its own modules show."""
    return {
        script.stem: {str(path.relative_to(ROOT)) for path in module_graph(script.resolve())}
        for script in sorted(PAGE_SCRIPTS.glob("*.js"))
    }


def json_bytes(catalog: Catalog, locale: str, files: set[str]) -> bytes:
    """The strings of the scripts in `files`: msgid -> text (a plural: its forms, in CLDR's order
    for the locale), as compact JSON."""
    messages: dict[str, str | list[str]] = {}
    for message in catalog:
        if not message.id or not any(path in files for path, _ in message.locations):
            continue
        texts = forms(message.string)
        messages[source_key(message)] = list(texts) if isinstance(message.id, tuple) else texts[0]
    body = {
        "locale": locale,
        "plural_categories": plural_categories(locale),
        "messages": dict(sorted(messages.items())),
    }
    return (json.dumps(body, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def plural_categories(locale: str) -> list[str]:
    """The CLDR categories in gettext's order of plural forms (Babel writes the Plural-Forms header
    in this order): es ["one", "many", "other"], zh-CN ["other"]. The scripts pick a form with
    Intl.PluralRules, which names a category."""
    tags = Locale.parse(babel_name(locale)).plural_form.tags
    return [tag for tag in ("zero", "one", "two", "few", "many") if tag in tags] + ["other"]


def compiled(locale: str, catalog: Catalog) -> dict[Path, bytes]:
    """The files compiled from one locale's catalog, by path."""
    files = {po_path(locale).with_suffix(".mo"): mo_bytes(catalog)}
    for page, modules in page_modules().items():
        files[FRONTEND_CATALOGS / locale / f"{page}.json"] = json_bytes(catalog, locale, modules)
    return files


def catalogs(template: Catalog) -> Iterator[tuple[str, Catalog]]:
    """Every locale's catalog as it should be: the translators' updated to the template, the pseudo written."""
    for locale in TRANSLATED:
        path = po_path(locale)
        catalog = read(path, babel_name(locale)) if path.exists() else Catalog(locale=babel_name(locale))
        catalog.update(template, no_fuzzy_matching=True, update_creation_date=False)
        catalog.revision_date = FIXED_DATE
        yield locale, catalog
    yield PSEUDO, pseudo_catalog(template)


def write_all() -> list[Path]:
    """`make i18n`: extract, update every catalog, compile. Returns the files written."""
    template = extract()
    written = {TEMPLATE: po_bytes(template)}
    for locale, catalog in catalogs(template):
        written[po_path(locale)] = po_bytes(catalog)
        written.update(compiled(locale, read_po(io.BytesIO(written[po_path(locale)]), locale=babel_name(locale))))
    changed = []
    for stale in set(FRONTEND_CATALOGS.rglob("*.json")) - set(written):  # a page or locale that is gone
        stale.unlink()
        changed.append(stale)
    for path, data in written.items():
        if not path.exists() or path.read_bytes() != data:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            changed.append(path)
    return changed


# -- check ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Finding:
    locale: str
    message: str
    problem: str

    def __str__(self) -> str:
        return f"{self.locale}: {self.message!r}: {self.problem}"


def placeholders(text: str) -> list[str]:
    return sorted(PLACEHOLDER.findall(text))


def check() -> list[Finding]:
    """Everything that would put English, a broken placeholder or a stale file in front of a learner."""
    findings: list[Finding] = []
    template = extract()
    committed = read(TEMPLATE) if TEMPLATE.exists() else Catalog()
    where = lambda c: {(source_key(m), tuple(sorted({p for p, _ in m.locations}))) for m in c if m.id}  # noqa: E731
    for key, files in sorted(where(template) ^ where(committed)):
        findings.append(
            Finding("template", key, f"extracted and committed templates differ ({', '.join(files)}): run make i18n")
        )
    for locale in EVERY:
        path = po_path(locale)
        if not path.exists():
            findings.append(Finding(locale, "", f"{path.relative_to(ROOT)} is missing: run make i18n"))
            continue
        catalog = read(path, babel_name(locale))
        for message in template:
            if not message.id:
                continue
            found = catalog.get(message.id, message.context)
            key = source_key(message)
            if found is None:
                findings.append(Finding(locale, key, "missing"))
                continue
            texts, sources = forms(found.string), forms(message.id)
            if found.fuzzy or not all(texts):
                findings.append(Finding(locale, key, "fuzzy or untranslated"))
            elif any(placeholders(t) != placeholders(sources[-1 if k else 0]) for k, t in enumerate(texts)):
                findings.append(Finding(locale, key, "its placeholders differ from the English"))
        for file, data in compiled(locale, catalog).items():
            if not file.exists() or file.read_bytes() != data:
                findings.append(
                    Finding(locale, "", f"{file.relative_to(ROOT)} is not compiled from its .po: run make i18n")
                )
    return findings


def main() -> int:
    import sys

    if "--check" not in sys.argv:
        for path in write_all():
            print(f"wrote {path.relative_to(ROOT)}")
    findings = check()
    for finding in findings:
        print(finding, file=sys.stderr)
    print(f"{len(findings)} problem(s) in {len(EVERY)} catalogs", file=sys.stderr)
    return 1 if findings else 0


if __name__ == "__main__":
    raise SystemExit(main())
