"""The language each learner last read the service in: kept when it changes, read by progress,
the analytics' learners and the exports (service/db/tables.py, LearnerLocale)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from .events import dialect_insert
from .tables import LearnerLocale


def keep(session: Session, platform_id: int, learner: str, locale: str, now: dt.datetime) -> None:
    """Record `locale` as the learner's language (insert, or replace the one kept)."""
    dialect = session.get_bind().dialect.name
    row = {"platform_id": platform_id, "learner": learner, "locale": locale, "updated_at": now}
    statement = dialect_insert(dialect, LearnerLocale).values(row)
    session.execute(
        statement.on_conflict_do_update(
            index_elements=["platform_id", "learner"],
            set_={"locale": statement.excluded.locale, "updated_at": statement.excluded.updated_at},
        )
    )


def of(session: Session, platform_id: int, learners: Iterable[str]) -> dict[str, str]:
    """{learner: locale} for those of `learners` whose language is known."""
    wanted = sorted(set(learners))
    if not wanted:
        return {}
    rows = session.execute(
        select(LearnerLocale.learner, LearnerLocale.locale).where(
            LearnerLocale.platform_id == platform_id, LearnerLocale.learner.in_(wanted)
        )
    )
    return {learner: locale for learner, locale in rows}
