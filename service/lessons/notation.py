"""One notation for subscripts (docs/conventions.md), as the workbench draws them: in a lesson's
prose a matrix's index is a subscript (W_O -> W<sub>O</sub>, Q_h -> Q<sub>h</sub>); code spans and
names such as d_model are left as written."""

from __future__ import annotations

import re

from markdown_it.common.utils import escapeHtml

INDEXED = re.compile(r"\b([WQKVOSA])_([QKVO]|h|\d+)\b")


def text_with_subscripts(self, tokens, idx, options, env) -> str:
    """markdown-it's rule for plain text: escaped as the default rule does, then subscripted."""
    return INDEXED.sub(r"\1<sub>\2</sub>", escapeHtml(tokens[idx].content))
