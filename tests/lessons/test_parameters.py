"""The parameter registry and the workbench agree: every parameter the workbench's controls
send has a readable name for analytics, and every name belongs to a control."""

import re
from pathlib import Path

from service.lessons.parameters import PARAMETERS

WORKBENCH = Path(__file__).resolve().parents[2] / "frontend" / "js" / "pages" / "workbench.js"


def sent_by_the_workbench() -> set[str]:
    """The second argument of every `update(change, "parameter", data)` call, and of every
    `on("control", "parameter", change)` (a select or input that calls update)."""
    text = WORKBENCH.read_text()
    updates = re.findall(r'update\(\s*\([^)]*\)\s*=>\s*\{.*?\}\s*,\s*"([a-z_]+)"', text, re.S)
    return set(updates) | set(re.findall(r'\bon\("[a-z-]+",\s*"([a-z_]+)"', text))


def test_every_parameter_the_workbench_sends_has_a_name_and_every_name_a_control():
    sent = sent_by_the_workbench()
    assert len(sent) >= 4  # the pattern still finds the calls
    assert sent == set(PARAMETERS)
