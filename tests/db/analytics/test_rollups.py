"""The rollups keep every analytics answer equal to a recount of the raw events: whatever the
stream (replays, conflicts, late events, erasures) and wherever the refresh has got to.

The reference is plain Python over the rows in the events table: bucket starts from datetime
arithmetic, keys from the JSON the client sent."""

from __future__ import annotations

import datetime as dt
import uuid
from collections import Counter, defaultdict

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from service.db import analytics as q
from service.db.analytics import funnel as progress_q
from service.db.analytics.rollup_refresh import catch_up, refresh, refresh_on
from service.db.challenges import add_check
from service.db.erasure import erase_learner
from service.db.events import EventConflict, NewEvent, record_events
from service.db.platforms import ensure_platform
from service.db.tables import Event, EventRollup, ExerciseCheck

pytestmark = pytest.mark.databases
T0 = dt.datetime(2026, 11, 2, 0, 0, tzinfo=dt.UTC)  # a Monday
LESSONS = ["multi-head-attention", "other-lesson"]
LEARNERS = ["ada", "bob", "cy", "dee"]
KINDS = [  # (checkpoint, event, data): parameters and token cells of every shape a client may send
    (None, "started", {}),
    ("predict", "completed", {"text": "wider heads"}),
    ("implement", "completed", {"tests": {"passed": 3, "failed": 0}}),
    ("implement", "completed", {"verification": "verified"}),
    ("explain", "completed", {"text": "the heads saw the same thing"}),
    ("experiment", "parameter-changed", {"parameter": "causal", "value": True}),
    ("experiment", "parameter-changed", {"parameter": "token", "token": 1, "dimension": 2}),
    ("experiment", "parameter-changed", {"parameter": "token", "token": 0, "dimension": 3}),
    ("experiment", "parameter-changed", {"parameter": "token", "token": "1", "dimension": 2}),
    ("experiment", "parameter-changed", {"parameter": "token", "token": 2.5, "dimension": 1}),
    ("experiment", "parameter-changed", {"parameter": "token", "token": True, "dimension": 1}),
    ("experiment", "parameter-changed", {"parameter": 7}),
    ("experiment", "parameter-changed", {"parameter": "x" * 200}),
    ("experiment", "parameter-changed", {}),
    ("implement", "attempted", {"tests": {"passed": 1, "failed": 2}}),
]
WORKBENCH = "multi-head-workbench"  # parameter changes there complete the experiment
SPAN_MINUTES = 16 * 24 * 60  # a little over two weeks: buckets of every grain fill and split


# -- the reference ------------------------------------------------------------------------


def bucket(moment: dt.datetime, grain: str) -> str:
    moment = moment.astimezone(dt.UTC).replace(minute=0, second=0, microsecond=0, tzinfo=None)
    if grain != "hour":
        moment = moment.replace(hour=0)
    if grain == "week":
        moment -= dt.timedelta(days=moment.weekday())
    return moment.isoformat()


def count(value) -> int | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 999_999
    return value if ok else None


def parameter(data: dict) -> str | None:
    value = data.get("parameter")
    return value if isinstance(value, str) and len(value) <= 128 else None


def expected_series(events, grain, group_by, lesson, start, end):
    groups: dict = defaultdict(lambda: [0, set()])
    for e in events:
        if (lesson is not None and e.lesson != lesson) or not within(e.occurred_at, start, end):
            continue
        group = groups[(bucket(e.occurred_at, grain), e.event if group_by == "event" else e.checkpoint)]
        group[0] += 1
        group[1].add(e.learner)
    return sorted(((b, k, n, len(who)) for (b, k), (n, who) in groups.items()), key=lambda r: (r[0], r[1] or ""))


def expected_parameters(events, lesson, start, end):
    params: dict = defaultdict(lambda: [0, set()])
    cells: dict = defaultdict(lambda: [0, set()])
    for e in events:
        if e.lesson != lesson or e.event != "parameter-changed" or not within(e.occurred_at, start, end):
            continue
        name = parameter(e.data)
        params[name][0] += 1
        params[name][1].add(e.learner)
        token, dim = count(e.data.get("token")), count(e.data.get("dimension"))
        if name == "token" and token is not None and dim is not None:
            cells[(token, dim)][0] += 1
            cells[(token, dim)][1].add(e.learner)
    return (
        sorted(((p, n, len(w)) for p, (n, w) in params.items()), key=lambda r: (-r[1], r[0] or "")),
        sorted((t, d, n, len(w)) for (t, d), (n, w) in cells.items()),
    )


def expected_progress(events, lessons, start, end):
    """(funnel, {checkpoint: (learners, [median, p90])}) for the learners whose first event in
    the lesson falls in [start, end), by the lesson's completion rules."""
    lesson = lessons[LESSONS[0]]
    ids = [cp.id for cp in lesson.checkpoints]
    first: dict = {}
    done: dict = defaultdict(dict)
    for e in sorted((e for e in events if e.lesson == LESSONS[0]), key=lambda e: e.occurred_at):
        first.setdefault(e.learner, e.occurred_at)
        cp = lesson.completes(e.event, e.checkpoint, e.instance_id)
        if cp is not None and cp.id not in done[e.learner]:
            how = None
            if cp.requires == "passing-tests":
                how = "verified" if e.data.get("verification") == "verified" else "reported"
            done[e.learner][cp.id] = (e.occurred_at, how)
    cohort = [who for who, t in first.items() if within(t, start, end)]
    funnel = {
        "started": len(cohort),
        "completed": {c: sum(c in done[w] for w in cohort) for c in ids},
        "after_previous": {
            b: sum(a in done[w] and b in done[w] for w in cohort) for a, b in zip(ids, ids[1:], strict=False)
        },
        "verification": dict(Counter((c, how) for w in cohort for c, (_, how) in done[w].items() if how is not None)),
    }
    times = {}
    for c in ids:
        seconds = [int((done[w][c][0] - first[w]).total_seconds()) for w in cohort if c in done[w]]
        times[c] = (len(seconds), list(np.quantile(seconds, [0.5, 0.9])) if seconds else [0.0, 0.0])
    return funnel, times


def expected_mistakes(checks, start, end) -> dict:
    times: Counter = Counter()
    who: dict = defaultdict(set)
    for check in checks:
        if check.lesson != LESSONS[0] or not check.diagnosis or not within(check.created_at, start, end):
            continue
        for mistake in check.diagnosis.split(","):
            times[mistake] += 1
            if check.learner is not None:
                who[mistake].add(check.learner)
    return {m: (n, len(who[m])) for m, n in times.items()}


def within(moment, start, end) -> bool:
    return (start is None or moment >= start) and (end is None or moment < end)


def raw_events(db, platform: int) -> list[Event]:
    with db.read() as session:
        return list(session.scalars(select(Event).where(Event.platform_id == platform)))


def assert_answers_match_a_recount(db, platform: int, windows, lessons) -> None:
    events = raw_events(db, platform)
    with db.read() as session:
        checks = list(session.scalars(select(ExerciseCheck).where(ExerciseCheck.platform_id == platform)))
    ids = [cp.id for cp in lessons[LESSONS[0]].checkpoints]
    with db.snapshot() as conn:
        for start, end in windows:
            window = q.Window(start, end)
            for grain in ("hour", "day", "week"):
                for group_by in ("event", "checkpoint"):
                    for lesson in (LESSONS[0], None):
                        got = q.timeseries(conn, platform, grain, group_by, window, lesson)
                        assert got == expected_series(events, grain, group_by, lesson, start, end), (
                            grain,
                            group_by,
                            lesson,
                            start,
                            end,
                        )
            params, cells = expected_parameters(events, LESSONS[0], start, end)
            assert q.parameters(conn, platform, LESSONS[0], window) == params
            assert q.token_cells(conn, platform, LESSONS[0], window) == cells
            assert q.mistakes(conn, platform, LESSONS[0], window) == expected_mistakes(checks, start, end)
            funnel, times = expected_progress(events, lessons, start, end)
            assert progress_q.funnel(conn, platform, LESSONS[0], ids, window) == funnel, (start, end)
            for checkpoint, (n, values) in times.items():
                got = progress_q.durations(conn, platform, LESSONS[0], checkpoint, (0.5, 0.9), window)
                assert got[0] == n and np.allclose(got[1], values), (checkpoint, start, end)


# -- the streams ---------------------------------------------------------------------------

minute = st.integers(0, SPAN_MINUTES)
event = st.tuples(st.sampled_from(LEARNERS), st.sampled_from(LESSONS), st.sampled_from(range(len(KINDS))), minute)
step = st.one_of(
    st.tuples(st.just("batch"), st.lists(event, min_size=1, max_size=8)),
    st.tuples(st.just("replay"), st.integers(0, 10**6)),
    st.tuples(st.just("conflict"), st.integers(0, 10**6)),
    st.tuples(st.just("erase"), st.sampled_from(LEARNERS)),
    st.tuples(
        st.just("check"),
        st.tuples(
            st.sampled_from([*LEARNERS, None]),
            st.sampled_from(LESSONS),
            st.lists(st.sampled_from(["no_scaling", "no_mask", "shared_heads"]), max_size=2, unique=True),
            minute,
        ),
    ),
    st.tuples(st.just("refresh"), st.integers(1, 9)),  # one chunk of that many ids
    st.tuples(st.just("refresh"), st.just(None)),  # everything so far
)
moment = minute.map(lambda m: T0 + dt.timedelta(minutes=m, seconds=m % 7))
aligned = st.integers(0, 16).map(lambda d: T0 + dt.timedelta(days=d))
bound = st.one_of(st.none(), moment, aligned)


def test_every_answer_equals_a_recount_whatever_the_stream_and_the_refresh(db, app):
    lessons = app.extensions["lessons"]

    @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
    @given(steps=st.lists(step, min_size=1, max_size=14), windows=st.lists(st.tuples(bound, bound), max_size=2))
    def check(steps, windows):
        with db.write() as session:
            platform = ensure_platform(session, f"p-{uuid.uuid4().hex[:12]}").id
        kept: list[NewEvent] = []
        for kind, arg in steps:
            if kind == "batch":
                fresh = []
                for learner, lesson, k, m in arg:
                    checkpoint, kind, data = KINDS[k]
                    instance = WORKBENCH if kind == "parameter-changed" else None
                    serial = dt.timedelta(minutes=m, seconds=m % 7, microseconds=len(kept) + len(fresh))  # no ties
                    fresh.append(
                        NewEvent(str(uuid.uuid4()), learner, lesson, checkpoint, kind, instance, data, T0 + serial)
                    )
                record_events(db, platform, fresh, lessons)
                kept += fresh
            elif kind == "replay" and kept:
                record_events(db, platform, [kept[arg % len(kept)]], lessons)
            elif kind == "conflict" and kept:
                old = kept[arg % len(kept)]
                changed = NewEvent(old.event_id, old.learner, old.lesson, None, "started", None, {"x": 1}, T0)
                extra = NewEvent(str(uuid.uuid4()), "ada", LESSONS[0], None, "started", None, {}, T0)
                with pytest.raises(EventConflict):
                    record_events(db, platform, [extra, changed], lessons)
            elif kind == "check":
                learner, lesson, mistakes, m = arg
                with db.write() as session:
                    add_check(
                        session,
                        platform,
                        learner,
                        lesson,
                        {},
                        not mistakes,
                        0.1,
                        mistakes,
                        T0 + dt.timedelta(minutes=m),
                    )
            elif kind == "erase":
                erase_learner(db, platform, arg)
                kept = [e for e in kept if e.learner != arg]  # a replay of theirs is acknowledged, not stored
            elif kind == "refresh":
                if arg is None:
                    refresh(db)
                else:
                    with db.write() as session:
                        refresh_on(session.connection(), chunk=arg)
        sorted_windows = [(a, b) if a is None or b is None or a <= b else (b, a) for a, b in windows]
        assert_answers_match_a_recount(db, platform, [(None, None), *sorted_windows], lessons)
        refresh(db)
        assert_answers_match_a_recount(db, platform, [(None, None), *sorted_windows], lessons)

    check()


def test_the_refresh_stores_what_the_recount_says_and_erasure_takes_it_back(db, app):
    """Not only the sum: after a full refresh the rows themselves hold the counts."""
    lessons = app.extensions["lessons"]
    with db.write() as session:
        platform = ensure_platform(session, "acme").id
    events = [
        NewEvent(str(uuid.uuid4()), who, LESSONS[0], None, "started", None, {}, T0 + dt.timedelta(minutes=i))
        for i, who in enumerate(["ada", "ada", "bob"])
    ]
    record_events(db, platform, events, lessons)
    refresh(db)

    def stored_day_rows():
        with db.read() as session:
            return {
                (r.lesson, r.key): (r.events, r.learners)
                for r in session.scalars(
                    select(EventRollup).where(
                        EventRollup.platform_id == platform,
                        EventRollup.grain == "day",
                        EventRollup.dimension == "event",
                    )
                )
            }

    assert stored_day_rows() == {(LESSONS[0], "=started"): (3, 2), ("", "=started"): (3, 2)}
    erase_learner(db, platform, "ada")
    assert stored_day_rows() == {(LESSONS[0], "=started"): (1, 1), ("", "=started"): (1, 1)}
    erase_learner(db, platform, "bob")
    assert stored_day_rows() == {}


def test_a_read_refreshes_first_only_when_the_tail_is_long(db, app):
    lessons = app.extensions["lessons"]
    with db.write() as session:
        platform = ensure_platform(session, "acme").id
    record_events(
        db,
        platform,
        [NewEvent(str(uuid.uuid4()), "ada", LESSONS[0], None, "started", None, {}, T0) for _ in range(5)],
        lessons,
    )
    catch_up(db, tail=5)
    with db.read() as session:
        assert session.scalars(select(EventRollup)).first() is None  # five events: added up on read
    catch_up(db, tail=4)
    with db.read() as session:
        assert session.scalars(select(EventRollup.events).where(EventRollup.grain == "all")).all() == []
        assert set(session.scalars(select(EventRollup.events).where(EventRollup.grain == "day"))) == {5}


def test_mistake_counts_follow_checks_and_erasure(db):
    with db.write() as session:
        platform = ensure_platform(session, "acme").id
        for learner, mistakes in [("ada", ["no_mask"]), ("ada", ["no_mask", "no_scaling"]), ("bob", ["no_mask"])]:
            add_check(session, platform, learner, LESSONS[0], {}, False, 0.5, mistakes)
        add_check(session, platform, None, LESSONS[0], {}, False, 0.5, ["no_mask"])  # a check, not a learner
    with db.read() as conn:
        assert q.mistakes(conn, platform, LESSONS[0]) == {"no_mask": (4, 2), "no_scaling": (1, 1)}
    erase_learner(db, platform, "ada")
    with db.read() as conn:
        assert q.mistakes(conn, platform, LESSONS[0]) == {"no_mask": (2, 1)}
