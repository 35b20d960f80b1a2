"""Erasure keeps its promise everywhere (issue 31): a launched learner who touched every feature
(events, a solved challenge, a check, the LTI launch, grades sent, xAPI forwarding) is erased,
and no row of any table still holds their id or what their platform said of them; their cookie
writes nothing more."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select, text

from service.db.tables import Base

from .lms_server import LmsServer
from .test_grades import complete, launch, send

pytestmark = pytest.mark.databases  # SQLite and PostgreSQL


def every_row(db) -> list[tuple[str, str]]:
    """(table, the row as text) for every row of every table the application has."""
    rows = []
    with db.read() as session:
        for table in Base.metadata.sorted_tables:
            for row in session.execute(select(table)):
                rows.append((table.name, json.dumps([str(v) for v in row], default=str)))
        if session.get_bind().dialect.name == "postgresql":  # the partitioned log's own tables
            for (name,) in session.execute(text("SELECT tablename FROM pg_tables WHERE tablename LIKE 'events_%'")):
                for row in session.execute(text(f'SELECT * FROM "{name}"')):
                    rows.append((name, json.dumps([str(v) for v in row], default=str)))
    return rows


def test_an_erased_learner_leaves_no_row_anywhere(app, client, db, lms_server: LmsServer):
    from service.xapi.forward import configure

    learner = launch(client, lms_server, sub="ada-lovelace-42")
    complete(client, learner, "predict", "experiment", "implement")
    check = {
        "case": {"tokens": [[1.0, 0.0], [0.0, 1.0]], "heads": 1},
        "output": {"weights": [[[1.0, 0.0], [0.5, 0.5]]]},
    }
    assert client.post("/api/v1/exercises/multi-head-attention/check", json=check).status_code == 200
    send(app)  # grades reach the platform
    configure(db, "lms", "http://127.0.0.1:9/xAPI/", "user", "password")  # statements wait to be sent
    assert any(learner in row for _, row in every_row(db))  # it was there

    erased = client.delete(f"/api/v1/learners/{learner}")
    assert erased.status_code == 200, erased.json
    left = [(table, row) for table, row in every_row(db) if learner in row or "ada-lovelace-42" in row]
    assert left == []

    # the erased learner's cookie writes nothing more under their id
    started = {"id": "00000000-0000-4000-8000-0000000000aa", "lesson": "multi-head-attention", "event": "started"}
    again = client.post("/api/v1/events", json={**started, "occurred_at": "2026-11-30T10:00:00Z"})
    assert again.status_code == 401
    assert not any(learner in row for _, row in every_row(db))


def test_an_erased_browser_learner_starts_afresh_and_a_new_launch_is_theirs_again(app, client, lms_server):
    learner = launch(client, lms_server)
    assert client.delete(f"/api/v1/learners/{learner}").status_code == 200
    assert client.get("/api/v1/session").status_code == 404  # the cookie is refused
    assert launch(client, lms_server) == learner  # the platform launches them again: their session works
    assert client.get("/api/v1/session").get_json()["learner"] == learner
