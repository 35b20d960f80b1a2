"""service/db/events/group_commit.py: requests arriving during a write are written together next, and
each request keeps its own answer and its own failure."""

from __future__ import annotations

import datetime as dt
import threading
import uuid

import pytest

from service.db.events import EventConflict, NewEvent, record_events
from service.db.events.group_commit import GroupCommit
from service.db.platforms import ensure_platform

T0 = dt.datetime(2026, 11, 30, 9, 0, tzinfo=dt.UTC)


class SlowWriter:
    """Records each write's items; the first write waits until told, so others queue behind it."""

    def __init__(self, fail_on: str | None = None):
        self.writes: list[list[str]] = []
        self.first_started = threading.Event()
        self.release = threading.Event()
        self.fail_on = fail_on

    def __call__(self, items: list[str]) -> list[str]:
        self.writes.append(list(items))
        if len(self.writes) == 1:
            self.first_started.set()
            assert self.release.wait(5)
        if self.fail_on in items:
            raise ValueError(f"cannot write {self.fail_on}")
        return [f"stored {item}" for item in items]


def run_all(group: GroupCommit, items: list[str]) -> tuple[dict[str, str], list[threading.Thread]]:
    answers: dict[str, str] = {}

    def submit(item: str) -> None:
        try:
            answers[item] = group.submit(item)
        except ValueError as exc:
            answers[item] = f"error: {exc}"

    threads = [threading.Thread(target=submit, args=(item,)) for item in items]
    for t in threads:
        t.start()
    return answers, threads


def behind_a_slow_write(group: GroupCommit, writer: SlowWriter, first: str, later: list[str]) -> dict[str, str]:
    """`first` starts a write that waits; `later` all queue behind it; then it is let go. The
    answers to `later`."""
    _, first_thread = run_all(group, [first])
    assert writer.first_started.wait(5)
    answers, threads = run_all(group, later)
    while len(group._queue) < len(later):
        threading.Event().wait(0.001)
    writer.release.set()
    for t in first_thread + threads:
        t.join(5)
    return answers


def test_requests_that_arrive_during_a_write_are_written_together_next():
    writer = SlowWriter()
    group = GroupCommit(writer, fits=lambda taken, item: True)
    more = behind_a_slow_write(group, writer, "a", ["b", "c", "d"])
    assert writer.writes[0] == ["a"]
    assert sorted(writer.writes[1]) == ["b", "c", "d"] and len(writer.writes) == 2
    assert more == {i: f"stored {i}" for i in "bcd"}


def test_a_request_that_does_not_fit_waits_for_the_next_write():
    writer = SlowWriter()
    group = GroupCommit(writer, fits=lambda taken, item: item[0] == taken[0][0])  # same first letter
    answers = behind_a_slow_write(group, writer, "a1", ["b1", "a2", "b2"])
    groups = sorted(sorted(w) for w in writer.writes[1:])
    assert groups == [["a2"], ["b1", "b2"]]
    assert answers == {"b1": "stored b1", "a2": "stored a2", "b2": "stored b2"}


def test_one_requests_failure_is_its_own():
    writer = SlowWriter(fail_on="bad")
    group = GroupCommit(writer, fits=lambda taken, item: True)
    answers = behind_a_slow_write(group, writer, "a", ["b", "bad", "c"])
    assert answers == {"b": "stored b", "c": "stored c", "bad": "error: cannot write bad"}
    assert sorted(writer.writes[1]) == ["b", "bad", "c"]  # together first, then each alone
    assert sorted(map(tuple, writer.writes[2:])) == [("b",), ("bad",), ("c",)]


def test_nothing_waits_for_company_when_the_service_is_idle():
    writer = SlowWriter()
    writer.release.set()
    group = GroupCommit(writer, fits=lambda taken, item: True)
    assert [group.submit(i) for i in "xyz"] == ["stored x", "stored y", "stored z"]
    assert writer.writes == [["x"], ["y"], ["z"]]


@pytest.mark.databases
def test_concurrent_requests_on_the_database_each_get_their_own_exact_answer(db, app):
    lessons = app.extensions["lessons"]
    with db.write() as session:
        platform = ensure_platform(session, "acme").id

    def event(learner: str, minute: int, event_id: str | None = None, data: dict | None = None) -> NewEvent:
        return NewEvent(
            event_id or str(uuid.uuid4()),
            learner,
            "multi-head-attention",
            "experiment",
            "parameter-changed",
            "multi-head-workbench",
            data or {"value": minute},
            T0 + dt.timedelta(minutes=minute),
        )

    stored = event("ada", 0)
    record_events(db, platform, [stored], lessons)
    conflicting = event("ada", 0, event_id=stored.event_id, data={"value": "changed"})
    shared = event("bob", 5)
    four = [{"manipulation": m} for m in ("last-two", "first-two", "causal-mask", "broken-reuse")]
    requests = [[event(f"l{i}", i + k, data=data) for k, data in enumerate(four)] for i in range(12)]
    requests += [[shared], [shared], [conflicting, event("cy", 3)], [stored]]
    answers: list = [None] * len(requests)
    start = threading.Barrier(len(requests))

    def send(i: int) -> None:
        start.wait()
        try:
            answers[i] = record_events(db, platform, requests[i], lessons)
        except EventConflict as exc:
            answers[i] = exc

    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(requests))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    for i in range(12):
        assert sorted(answers[i].created) == sorted(e.event_id for e in requests[i])
        assert answers[i].completed == [(f"l{i}", "multi-head-attention", "experiment")]
    twins = [answers[12], answers[13]]
    assert sorted(len(a.created) for a in twins) == [0, 1]  # one stored it, the other replayed it
    assert sorted(len(a.replayed) for a in twins) == [0, 1]
    assert isinstance(answers[14], EventConflict) and answers[14].event_ids == [stored.event_id]
    assert answers[15].replayed == [stored.event_id] and answers[15].created == []
    from sqlalchemy import func, select

    from service.db.tables import Event

    with db.read() as session:
        count = session.scalar(select(func.count()).select_from(Event).where(Event.platform_id == platform))
    assert count == 1 + 12 * 4 + 1  # the conflicting request stored nothing, its fresh event included
