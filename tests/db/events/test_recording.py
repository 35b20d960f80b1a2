"""service.db.events and service.db.erasure, called directly: exactly once, atomic batches,
the earliest completion wins, durations kept current, erasure with tombstones."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
from sqlalchemy import select

from service.db.erasure import erase_learner
from service.db.events import EventConflict, NewEvent, record_events
from service.db.platforms import ensure_platform
from service.db.tables import CheckpointProgress, Event

pytestmark = pytest.mark.databases
T0 = dt.datetime(2026, 11, 30, 10, 0, tzinfo=dt.UTC)


@pytest.fixture
def platform(db):
    with db.write() as session:
        return ensure_platform(session, "acme").id


@pytest.fixture
def lessons(app):
    return app.extensions["lessons"]


def new(learner="ada", checkpoint="experiment", event="parameter-changed", minutes=0.0, data=None, **kw) -> NewEvent:
    instance = "multi-head-workbench" if event == "parameter-changed" else None
    return NewEvent(
        event_id=kw.get("event_id", str(uuid.uuid4())),
        learner=learner,
        lesson="multi-head-attention",
        checkpoint=checkpoint,
        event=event,
        instance_id=instance,
        data={} if data is None else data,
        occurred_at=T0 + dt.timedelta(minutes=minutes),
    )


def stored(db, learner="ada"):
    with db.read() as session:
        return session.scalars(select(Event.event_id).where(Event.learner == learner).order_by(Event.id)).all()


def progress(db, checkpoint):
    with db.read() as session:
        return session.scalars(select(CheckpointProgress).where(CheckpointProgress.checkpoint == checkpoint)).one()


def test_new_events_are_stored_and_identical_replays_acknowledged(db, platform, lessons):
    batch = [new(), new(minutes=1)]
    first = record_events(db, platform, batch, lessons)
    again = record_events(db, platform, batch, lessons)
    assert sorted(first.created) == sorted(e.event_id for e in batch) and first.replayed == []
    assert again.created == [] and sorted(again.replayed) == sorted(e.event_id for e in batch)
    assert sorted(stored(db)) == sorted(e.event_id for e in batch)


def test_a_conflict_rejects_the_whole_batch(db, platform, lessons):
    kept = new(data={"parameter": "causal"})
    record_events(db, platform, [kept], lessons)
    changed = new(event_id=kept.event_id, data={"parameter": "reset"})
    fresh = new(minutes=2)
    with pytest.raises(EventConflict) as info:
        record_events(db, platform, [fresh, changed], lessons)
    assert info.value.event_ids == [kept.event_id]
    assert stored(db) == [kept.event_id]  # the fresh event of the failed batch is not there


def test_the_earliest_completion_wins_and_its_duration_follows_the_first_visit(db, platform, lessons):
    later = new(checkpoint="predict", event="completed", minutes=30, data={"text": "two wide"})
    record_events(db, platform, [new(minutes=10), later], lessons)
    assert progress(db, "predict").seconds_from_start == 20 * 60
    earlier = new(checkpoint="predict", event="completed", minutes=15, data={"text": "two wide, again"})
    record_events(db, platform, [earlier], lessons)
    assert progress(db, "predict").event_id == earlier.event_id
    record_events(db, platform, [new(minutes=0)], lessons)  # an earlier first visit arrives late
    assert progress(db, "predict").seconds_from_start == 15 * 60


@pytest.mark.parametrize(
    "data, verification",
    [
        ({"tests": {"passed": 3, "failed": 0}}, "reported"),
        ({"verification": "verified", "challenge": "0" * 32, "cases": 3}, "verified"),
    ],
)
def test_a_test_checkpoint_remembers_how_it_was_completed(db, platform, lessons, data, verification):
    record_events(db, platform, [new(checkpoint="implement", event="completed", data=data)], lessons)
    assert progress(db, "implement").verification == verification
    record_events(db, platform, [new(checkpoint="predict", event="completed", data={"text": "x"})], lessons)
    assert progress(db, "predict").verification is None


def test_erasure_deletes_everything_and_a_replay_is_acknowledged_not_stored(db, platform, lessons):
    event = new(checkpoint="predict", event="completed", data={"text": "mine"})
    record_events(db, platform, [event, new(learner="bob")], lessons)
    erased = erase_learner(db, platform, "ada")
    assert erased == {"events": 1, "checkpoints": 1, "exercise_checks": 0}
    assert stored(db) == [] and len(stored(db, "bob")) == 1
    replay = record_events(db, platform, [event], lessons)
    assert replay.erased == [event.event_id] and replay.created == []
    assert stored(db) == []
    assert erase_learner(db, platform, "nobody") is None


# -- every stream of batches leaves progress equal to a recomputation from the stored events --

CHECKPOINT_EVENTS = [  # (checkpoint, event, data): some complete a checkpoint, some do not
    ("experiment", "parameter-changed", {"parameter": "causal"}),
    ("predict", "completed", {"text": "wider heads"}),
    ("implement", "completed", {"tests": {"passed": 3, "failed": 0}}),
    ("implement", "attempted", {"tests": {"passed": 1, "failed": 2}}),
    (None, "started", {}),
]


def recomputed(events: list[NewEvent], lessons) -> tuple[dict, dict]:
    """Plain loops over the stored events: each learner's first event, each checkpoint's earliest
    completion and its seconds from that first event."""
    first: dict = {}
    for e in events:
        key = (e.lesson, e.learner)
        first[key] = min(first.get(key, e.occurred_at), e.occurred_at)
    done: dict = {}
    for e in events:
        checkpoint = lessons[e.lesson].completes(e.event, e.checkpoint, e.instance_id)
        if checkpoint is None:
            continue
        key = (e.learner, e.lesson, checkpoint.id)
        if key not in done or e.occurred_at < done[key].occurred_at:
            done[key] = e
    progress = {
        key: (e.event_id, e.occurred_at, (e.occurred_at - first[(key[1], key[0])]).total_seconds())
        for key, e in done.items()
    }
    return first, progress


def stored_state(db, platform: int) -> tuple[dict, dict]:
    from service.db.tables import LearnerLesson

    with db.read() as session:
        first = {
            (r.lesson, r.learner): r.first_event_at
            for r in session.scalars(select(LearnerLesson).where(LearnerLesson.platform_id == platform))
        }
        progress = {
            (r.learner, r.lesson, r.checkpoint): (r.event_id, r.completed_at, r.seconds_from_start)
            for r in session.scalars(select(CheckpointProgress).where(CheckpointProgress.platform_id == platform))
        }
    return first, progress


def test_any_stream_of_batches_leaves_first_visits_and_progress_as_recomputed(db, lessons):
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    microseconds = st.integers(0, 3 * 24 * 3600 * 10**6)  # distinct times to the microsecond
    event = st.tuples(st.sampled_from(["ada", "bob", "cy"]), st.sampled_from(CHECKPOINT_EVENTS), microseconds)
    batches = st.lists(st.lists(event, min_size=1, max_size=6), min_size=1, max_size=6)
    replays = st.lists(st.integers(0, 10**6), max_size=4)

    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
    @given(batches=batches, replays=replays)
    def check(batches, replays):
        with db.write() as session:
            platform = ensure_platform(session, f"p-{uuid.uuid4().hex[:12]}").id
        kept: list[NewEvent] = []
        used: set[int] = set()
        for batch in batches:
            fresh = []
            for learner, (checkpoint, kind, data), us in batch:
                while us in used:  # one event per microsecond: the earliest is never a tie
                    us += 1
                used.add(us)
                instance = "multi-head-workbench" if kind == "parameter-changed" else None
                fresh.append(
                    NewEvent(
                        str(uuid.uuid4()),
                        learner,
                        "multi-head-attention",
                        checkpoint,
                        kind,
                        instance,
                        data,
                        T0 + dt.timedelta(microseconds=us),
                    )
                )
            again = [kept[i % len(kept)] for i in replays] if kept else []  # replays ride along
            again = list({e.event_id: e for e in again}.values())
            result = record_events(db, platform, fresh + again, lessons)
            assert sorted(result.created) == sorted(e.event_id for e in fresh)
            assert sorted(result.replayed) == sorted(e.event_id for e in again)
            kept += fresh
            assert stored_state(db, platform) == recomputed(kept, lessons)

    check()


def test_durations_are_exact_to_the_microsecond_even_next_to_a_whole_second(db, platform, lessons):
    """SQLite's date functions round to milliseconds: 44.9995 s must not count as 45."""
    completing = new(checkpoint="predict", event="completed", minutes=33 + 44.9995 / 60, data={"text": "x"})
    record_events(db, platform, [new(minutes=0), completing], lessons)
    expected = (completing.occurred_at - T0).total_seconds()
    assert progress(db, "predict").seconds_from_start == expected
    assert abs(expected - 2024.9995) < 1e-6


FOUR = ("last-two", "first-two", "causal-mask", "broken-reuse")


def manipulation(name, minutes, learner="ada", **kw):
    return new(learner=learner, minutes=minutes, data={"parameter": "token", "manipulation": name}, **kw)


def completed_checkpoints(db, learner="ada"):
    with db.read() as session:
        return set(session.scalars(select(CheckpointProgress.checkpoint).where(CheckpointProgress.learner == learner)))


def test_one_manipulation_does_not_complete_the_experiment_all_four_do(db, platform, lessons):
    first = record_events(db, platform, [manipulation("last-two", 1), new(minutes=2)], lessons)
    assert first.completed == [] and completed_checkpoints(db) == set()
    record_events(db, platform, [manipulation("first-two", 3), manipulation("causal-mask", 4)], lessons)
    assert completed_checkpoints(db) == set()
    last = record_events(db, platform, [manipulation("broken-reuse", 5)], lessons)
    assert last.completed == [("ada", "multi-head-attention", "experiment")]
    done = progress(db, "experiment")
    assert done.completed_at == T0 + dt.timedelta(minutes=5)
    assert done.seconds_from_start == 4 * 60  # from the learner's first event, at minute 1


def test_replays_and_repeats_of_a_manipulation_count_once(db, platform, lessons):
    once = manipulation("last-two", 1)
    record_events(db, platform, [once], lessons)
    record_events(db, platform, [once], lessons)  # the same event again
    record_events(db, platform, [manipulation("last-two", 2), manipulation("last-two", 3)], lessons)
    record_events(db, platform, [manipulation("first-two", 4), manipulation("causal-mask", 5)], lessons)
    assert "experiment" not in completed_checkpoints(db)


def test_a_manipulation_reported_late_moves_the_completion_to_when_the_last_was_first_done(db, platform, lessons):
    record_events(db, platform, [manipulation(m, 10 + i) for i, m in enumerate(FOUR)], lessons)
    assert progress(db, "experiment").completed_at == T0 + dt.timedelta(minutes=13)
    # An offline device sends older reports of two of them: the set was whole at minute 11 then.
    record_events(db, platform, [manipulation("broken-reuse", 2), manipulation("causal-mask", 11)], lessons)
    assert progress(db, "experiment").completed_at == T0 + dt.timedelta(minutes=11)


def test_learners_are_counted_apart_and_one_batch_can_complete_several(db, platform, lessons):
    batch = [manipulation(m, i, learner=who) for who in ("ada", "bob") for i, m in enumerate(FOUR)]
    result = record_events(db, platform, batch[:-1], lessons)
    assert result.completed == [("ada", "multi-head-attention", "experiment")]
    assert completed_checkpoints(db, "bob") == set()


def test_erasure_forgets_the_manipulations(db, platform, lessons):
    from service.db.tables import LearnerManipulation

    record_events(db, platform, [manipulation("last-two", 1), manipulation("first-two", 2)], lessons)
    erase_learner(db, platform, "ada")
    with db.read() as session:
        assert session.scalars(select(LearnerManipulation)).all() == []
    # A new record for the same id starts from nothing.
    record_events(db, platform, [manipulation(m, 20 + i) for i, m in enumerate(FOUR[1:])], lessons)
    assert "experiment" not in completed_checkpoints(db)
