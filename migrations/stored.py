"""The stored function `workbench_record_events`, each version written once (Alembic's
replaceable-objects recipe): the migration that first installs it holds its whole text
(`FUNCTION`); each later migration that changes it holds only its edits of the version before,
`FUNCTION_EDITS = (that revision, [(before, after), ...])`, each of which must apply exactly once.
A migration installs its version; its downgrade reinstalls the one before. Imported by the
migrations when they run (env.py puts this folder on the path)."""

from __future__ import annotations

from typing import Any


def version(revision: str, script: Any = None) -> str:
    """The function's whole text as `revision` installs it."""
    if script is None:
        from alembic import op

        script = op.get_context().script
    module = script.get_revision(revision).module
    if hasattr(module, "FUNCTION"):
        return module.FUNCTION
    before, edits = module.FUNCTION_EDITS
    return edited(version(before, script), edits, revision)


def edited(sql: str, edits: list[tuple[str, str]], revision: str) -> str:
    for before, after in edits:
        if sql.count(before) != 1:
            raise ValueError(
                f"revision {revision}: {before[:60]!r} is in the function {sql.count(before)} times, not once"
            )
        sql = sql.replace(before, after)
    return sql
