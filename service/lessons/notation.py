"""One notation for subscripts (docs/conventions.md), as the workbench draws them: in a lesson's
prose a matrix's index is a subscript (W_O -> W<sub>O</sub>, Q_h -> Q<sub>h</sub>); code spans and
names such as d_model are left as written. A line break between two Chinese characters is no space."""

from __future__ import annotations

import re

from markdown_it.common.utils import escapeHtml

INDEXED = re.compile(r"\b([WQKVOSA])_([QKVO]|h|\d+)\b")
CJK = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]")  # ideographs and full-width punctuation


def text_with_subscripts(self, tokens, idx, options, env) -> str:
    """markdown-it's rule for plain text: escaped as the default rule does, then subscripted."""
    return INDEXED.sub(r"\1<sub>\2</sub>", escapeHtml(tokens[idx].content))


def soft_break(self, tokens, idx, options, env) -> str:
    """A line break inside a paragraph: a space between words, none between Chinese characters (browsers
    but Firefox draw the newline as a space: "问题， 那时")."""
    before = next((t.content[-1] for t in reversed(tokens[:idx]) if t.content), "")  # past **, *, links
    after = next((t.content[0] for t in tokens[idx + 1 :] if t.content), "")
    return "" if CJK.match(before) and CJK.match(after) else "\n"
