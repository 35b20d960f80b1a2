"""The parameter registry and the workbench agree: every parameter the workbench's controls
send has a readable name for analytics, and every name belongs to a control."""

import re
from pathlib import Path

from service.lessons.parameters import PARAMETERS

PAGE = Path(__file__).resolve().parents[2] / "frontend" / "js"
WORKBENCH = [PAGE / "pages" / "workbench.js", PAGE / "views" / "workbench-controls.js"]


def arguments(text: str, start: int) -> list[str]:
    """The top-level arguments of the call whose "(" is at `start` (brackets and strings counted)."""
    depth, quote, args, current = 0, None, [], ""
    for ch in text[start + 1 :]:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'`":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0:
                return [*args, current.strip()]
            depth -= 1
        elif ch == "," and depth == 0:
            args.append(current.strip())
            current = ""
            continue
        current += ch
    return args


def sent_by_the_workbench() -> set[str]:
    """The second argument of every `update(change, "parameter", data)` call, and of every
    `when("control", "parameter", change)` (a select or input whose change calls update)."""
    sent = set()
    for path in WORKBENCH:
        text = path.read_text()
        for call in re.finditer(r"\b(update|when)\(", text):
            args = arguments(text, call.end() - 1)
            if len(args) > 1 and re.fullmatch(r'"[a-z_]+"', args[1]):
                sent.add(args[1].strip('"'))
    return sent


def test_every_parameter_the_workbench_sends_has_a_name_and_every_name_a_control():
    sent = sent_by_the_workbench()
    assert len(sent) >= 4  # the pattern still finds the calls
    assert sent == set(PARAMETERS)
