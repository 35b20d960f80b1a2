"""Analytics on a constructed cohort: exact numbers, suppression, tenancy, scopes, exports."""

import csv
import datetime as dt
import io
import threading

import orjson
import pytest
from sqlalchemy import func, select

from service.app import create_app
from service.db.challenges import add_check
from service.db.platforms import ensure_platform
from service.db.tables import Event, RollupWatermark

from .helpers import EXPLANATION, LESSON, event, experiment

pytestmark = pytest.mark.databases
T0 = dt.datetime(2026, 11, 20, 10, 0, tzinfo=dt.UTC)
A = "/api/v1/analytics"


def at(minutes: float) -> str:
    return (T0 + dt.timedelta(minutes=minutes)).isoformat()


def completed(learner, checkpoint, minutes, **data):
    payload = data or ({"tests": {"passed": 4, "failed": 0}} if checkpoint == "implement" else {"text": EXPLANATION})
    return event(
        learner, checkpoint=checkpoint, event="completed", instance_id=None, data=payload, occurred_at=at(minutes)
    )


def build_cohort(client, headers):
    """7 learners start; 6 predict; 5 experiment; L1-L4 and L6 implement; L1-L4 and L6 explain."""
    events = []
    for i in range(1, 8):
        start = i * 60  # learner i starts at T0 + i hours
        name = f"L{i}"
        events.append(event(name, checkpoint=None, event="started", instance_id=None, data={}, occurred_at=at(start)))
        if i <= 6:
            events.append(completed(name, "predict", start + 2))
        if i <= 5:
            events.extend(experiment(name, occurred_at=at(start + 5)))  # the four manipulations
        if i <= 2:
            events.append(
                event(name, data={"parameter": "failure_mode", "value": "no_scaling"}, occurred_at=at(start + 6))
            )
        if i in (1, 2, 3, 4, 6):
            events.append(completed(name, "implement", start + 10 + i))
            events.append(completed(name, "explain", start + 30))
    response = client.post("/api/v1/events", json={"events": events}, headers=headers)
    assert response.status_code == 201, response.json
    return events


@pytest.fixture
def cohort(client, acme):
    return build_cohort(client, acme)


@pytest.fixture
def analyst(make_key, cohort):
    return make_key("acme", "analytics:read")


def test_funnel_counts_and_shares(client, analyst):
    body = client.get(f"{A}/lessons/{LESSON}/funnel", headers=analyst).json
    assert body["started"] == 7 and body["k"] == 5
    steps = {s["checkpoint"]: s for s in body["steps"]}
    assert [s["checkpoint"] for s in body["steps"]] == ["predict", "experiment", "implement", "explain"]
    assert [steps[c]["learners"] for c in ("predict", "experiment", "implement", "explain")] == [6, 5, 5, 5]
    assert steps["predict"]["share_of_previous"] == round(6 / 7, 4)
    assert steps["experiment"]["share_of_previous"] == round(5 / 6, 4)
    assert steps["implement"]["share_of_previous"] == round(4 / 5, 4)  # L5 experimented but did not implement
    assert steps["explain"]["share_of_previous"] == 1.0


def test_durations_median_and_p90(client, analyst):
    body = client.get(f"{A}/lessons/{LESSON}/durations", headers=analyst).json
    rows = {r["checkpoint"]: r for r in body["checkpoints"]}
    assert rows["predict"]["median_seconds"] == 120 and rows["predict"]["p90_seconds"] == 120
    assert rows["experiment"]["median_seconds"] == 300
    # implement took 11, 12, 13, 14 and 16 minutes: median 13 min; p90 (linear) 14 + 0.6 * 2 = 15.2 min.
    assert rows["implement"]["median_seconds"] == pytest.approx(780)
    assert rows["implement"]["p90_seconds"] == pytest.approx(912)
    assert rows["implement"]["learners"] == 5


def test_timeseries_by_day_and_event(client, analyst):
    body = client.get(f"{A}/events/timeseries?bucket=day&group_by=event", headers=analyst).json
    rows = {(r["bucket"], r["key"]): r for r in body["rows"]}
    day = "2026-11-20T00:00:00Z"
    assert rows[(day, "started")]["events"] == 7 and rows[(day, "started")]["learners"] == 7
    assert rows[(day, "completed")]["events"] == 6 + 5 + 5 and rows[(day, "completed")]["learners"] == 6
    assert rows[(day, "parameter-changed")]["events"] == 5 * 4 + 2 and rows[(day, "parameter-changed")]["learners"] == 5


def test_timeseries_by_hour_respects_from_and_to(client, analyst):
    query = "bucket=hour&group_by=checkpoint&from=2026-11-20T11:00:00Z&to=2026-11-20T13:00:00Z"
    body = client.get(f"{A}/events/timeseries?{query}", headers=analyst).json
    assert {r["bucket"] for r in body["rows"]} <= {"2026-11-20T11:00:00Z", "2026-11-20T12:00:00Z"}
    assert body["rows"] and all(r["suppressed"] for r in body["rows"])  # one or two learners an hour: below k


def test_week_buckets_start_on_monday(client, analyst):
    body = client.get(f"{A}/events/timeseries?bucket=week", headers=analyst).json
    assert {r["bucket"] for r in body["rows"]} == {"2026-11-16T00:00:00Z"}  # Friday the 20th -> Monday the 16th


def test_parameters_and_suppression_of_small_groups(client, analyst):
    body = client.get(f"{A}/lessons/{LESSON}/parameters", headers=analyst).json
    rows = {r["id"]: r for r in body["parameters"]}
    assert (rows["token"]["times"], rows["token"]["learners"], rows["token"]["suppressed"]) == (10, 5, False)
    assert (rows["causal"]["times"], rows["causal"]["learners"]) == (5, 5)
    assert rows["failure_mode"]["suppressed"] is True and rows["failure_mode"]["times"] is None  # 2 learners < k
    assert body["token_cells"] == [
        {"token": 1, "dimension": 3, "times": 5, "learners": 5, "suppressed": False},
        {"token": 2, "dimension": 1, "times": 5, "learners": 5, "suppressed": False},
    ]


def test_how_far_learners_got_through_the_four_manipulations(client, acme, analyst):
    body = client.get(f"{A}/lessons/{LESSON}/parameters", headers=analyst).json["manipulations"]
    assert body["checkpoint"] == "experiment"
    expected = [("last-two", 5), ("first-two", 5), ("causal-mask", 5), ("broken-reuse", 5)]
    assert [(m["id"], m["learners"]) for m in body["manipulations"]] == expected
    # Five more learners do only the first one, two of them twice: counted once each.
    more = [e for i in range(5) for e in experiment(f"M{i}")[:1]] + experiment("M0")[:1] + experiment("M1")[:1]
    assert client.post("/api/v1/events", json={"events": more}, headers=acme).status_code == 201
    body = client.get(f"{A}/lessons/{LESSON}/parameters", headers=analyst).json["manipulations"]
    first, second = body["manipulations"][:2]
    assert (first["learners"], first["reports"], second["learners"]) == (10, 12, 5)


def test_mistakes_from_exercise_checks(client, acme, analyst):
    from service.compute import multi_head_attention

    tokens = [[1.0, 0.5, -0.5, 1.0], [0.2, 1.0, 1.5, -0.3], [-1.0, 0.3, 0.8, 0.6]]
    for learner, mode in [(f"L{i}", "no_scaling") for i in range(1, 6)] + [("L6", "interleaved_split")]:
        trace = multi_head_attention(tokens, 2, failure_mode=mode)
        client.post(
            "/api/v1/exercises/multi-head-attention/check",
            headers=acme,
            json={
                "case": {"tokens": tokens, "heads": 2},
                "output": {"weights": trace.weights.tolist()},
                "learner": learner,
            },
        )
    body = client.get(f"{A}/lessons/{LESSON}/mistakes", headers=analyst).json
    rows = {r["id"]: r for r in body["mistakes"]}
    assert (rows["no_scaling"]["times"], rows["no_scaling"]["learners"]) == (5, 5)
    assert rows["interleaved_split"]["suppressed"] is True


def test_a_larger_k_suppresses_everything(app_config, cohort, client, analyst):
    strict = create_app({**app_config, "k_anonymity": 10}).test_client()
    body = strict.get(f"{A}/lessons/{LESSON}/funnel", headers=analyst).json
    assert body["started"] is None and all(s["suppressed"] and s["learners"] is None for s in body["steps"])


def test_reads_roll_up_first_when_far_behind_and_never_on_a_replica(app_config, cohort, client, analyst, db):
    def watermark():
        with db.read() as session:
            return session.scalar(select(RollupWatermark.last_event_id))

    series = f"{A}/events/timeseries?bucket=day&group_by=event"
    replica = create_app({**app_config, "rollups_refresh_on_read_after": 0}).test_client()
    before = replica.get(series, headers=analyst).json
    assert (watermark() or 0) == 0  # nothing rolled up, and the answer counted every event anyway
    assert sum(r["events"] or 0 for r in before["rows"]) > 0
    eager = create_app({**app_config, "rollups_refresh_on_read_after": 1}).test_client()
    assert eager.get(series, headers=analyst).json == before
    with db.read() as session:
        assert watermark() == session.scalar(select(func.max(Event.id)))


def test_learners_rows_are_paginated(client, analyst):
    seen, cursor = [], None
    while True:
        page = client.get(
            f"{A}/learners?lesson={LESSON}&limit=3" + (f"&cursor={cursor}" if cursor else ""), headers=analyst
        ).json
        seen += page["learners"]
        cursor = page["next"]
        if not cursor:
            break
    assert [r["learner"] for r in seen] == [f"L{i}" for i in range(1, 8)]
    assert set(seen[0]["completed"]) == {"predict", "experiment", "implement", "explain"}
    assert seen[6]["completed"] == {}


def test_platforms_see_only_their_own_learners(client, globex, make_key, cohort):
    other = make_key("globex", "analytics:read")
    funnel = client.get(f"{A}/lessons/{LESSON}/funnel", headers=other).json
    assert funnel["started"] == 0 and all(s["learners"] == 0 for s in funnel["steps"])  # none of acme's counted
    assert funnel["platform"] == "globex"
    assert client.get(f"{A}/learners?lesson={LESSON}", headers=other).json["learners"] == []
    assert client.get(f"{A}/events/export", headers=other).data == b""


@pytest.mark.parametrize(
    "path",
    [
        f"{A}/lessons/{LESSON}/funnel",
        f"{A}/events/timeseries",
        f"{A}/events/export",
        f"{A}/learners?lesson={LESSON}",
        f"{A}/lessons/{LESSON}/mistakes",
    ],
)
def test_every_analytics_endpoint_needs_the_analytics_scope(client, make_key, path):
    assert client.get(path, headers=make_key("acme", "events:write,progress:read")).status_code == 403
    assert client.get(path, headers=make_key("acme", "analytics:read")).status_code == 200


def test_scopes_and_principals(client, make_key):
    writer = make_key("acme", "events:write,progress:read")
    assert client.get(f"{A}/lessons/{LESSON}/funnel", headers=writer).status_code == 403
    client.post("/api/v1/session")
    assert client.get(f"{A}/lessons/{LESSON}/funnel").status_code == 401  # browser sessions never see analytics
    assert client.get(f"{A}/lessons/nope/funnel", headers=make_key("acme", "analytics:read")).status_code == 404


def export_all(client, headers, fmt="ndjson", limit=None, after=None):
    query = f"format={fmt}" + (f"&limit={limit}" if limit else "") + (f"&after={after}" if after else "")
    return client.get(f"{A}/events/export?{query}", headers=headers).data


def test_export_ndjson_has_every_event_once(client, analyst, cohort):
    lines = [orjson.loads(line) for line in export_all(client, analyst).splitlines()]
    assert sorted(e["id"] for e in lines) == sorted(e["id"] for e in cohort)
    stored = [e["stored_at"] for e in lines]
    assert stored == sorted(stored) and len({e["cursor"] for e in lines}) == len(lines)


def test_export_csv(client, analyst, cohort):
    rows = list(csv.DictReader(io.StringIO(export_all(client, analyst, "csv").decode())))
    assert len(rows) == len(cohort)
    assert {r["id"] for r in rows} == {e["id"] for e in cohort}
    assert orjson.loads(rows[0]["data"]) is not None


def test_export_resumes_after_a_cursor_and_is_stable_under_concurrent_inserts(client, acme, analyst, cohort):
    sent = {e["id"] for e in cohort}
    seen: list[str] = []
    cursor = None
    stop = threading.Event()

    def writer():
        while not stop.is_set():
            body = event("late-writer")
            if client.post("/api/v1/events", json=body, headers=acme).status_code == 201:
                sent.add(body["id"])

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        for _ in range(40):
            page = [orjson.loads(line) for line in export_all(client, analyst, limit=4, after=cursor).splitlines()]
            seen += [e["id"] for e in page]
            if page:
                cursor = page[-1]["cursor"]
    finally:
        stop.set()
        thread.join()
    while True:  # drain what is left
        page = [orjson.loads(line) for line in export_all(client, analyst, limit=50, after=cursor).splitlines()]
        if not page:
            break
        seen += [e["id"] for e in page]
        cursor = page[-1]["cursor"]
    assert len(seen) == len(set(seen))  # nothing twice
    assert set(seen) == sent  # nothing missed


def test_a_forged_export_cursor_is_400(client, analyst):
    assert client.get(f"{A}/events/export?after=bm9wZQ", headers=analyst).status_code == 400


def test_a_late_earlier_event_moves_the_durations(client, acme, analyst):
    before = client.get(f"{A}/lessons/{LESSON}/durations", headers=analyst).json
    # Each learner's start moves one hour earlier (an offline "started" event arriving late).
    late = [
        event(f"L{i}", checkpoint=None, event="started", instance_id=None, data={}, occurred_at=at(i * 60 - 60))
        for i in range(1, 8)
    ]
    assert client.post("/api/v1/events", json={"events": late}, headers=acme).status_code == 201
    after = client.get(f"{A}/lessons/{LESSON}/durations", headers=analyst).json
    for old, new in zip(before["checkpoints"], after["checkpoints"], strict=True):
        assert new["median_seconds"] == pytest.approx(old["median_seconds"] + 3600)


@pytest.mark.databases
def test_one_k_rule_everywhere_for_a_group_of_two(client, acme, make_key, db):
    """Two learners (k is 5): every figure is hidden the same way, and nothing a learner typed
    appears in a hidden row."""
    analyst = make_key("acme", "analytics:read")
    events = []
    for learner in ("tiny-1", "tiny-2"):
        events += [
            event(learner, data={"parameter": "token", "token": 2, "dimension": 4, "value": 1.0}),
            event(learner, data={"parameter": "my secret note", "value": 1.0}),
            event(learner, checkpoint="predict", event="completed", instance_id=None, data={"text": "mine"}),
        ]
    assert client.post("/api/v1/events", json={"events": events}, headers=acme).status_code == 201
    params = client.get(f"{A}/lessons/{LESSON}/parameters", headers=analyst).json
    assert params["parameters"] and all(r["suppressed"] and r["times"] is None for r in params["parameters"])
    assert "my secret note" not in str(params)
    assert params["token_cells"] and all(c["suppressed"] and c["times"] is None for c in params["token_cells"])
    learners = client.get(f"{A}/learners?lesson={LESSON}", headers=analyst).json
    assert learners["suppressed"] is True and learners["learners"] == []
    funnel = client.get(f"{A}/lessons/{LESSON}/funnel", headers=analyst).json
    assert funnel["started"] is None and all(s["suppressed"] for s in funnel["steps"])
    durations = client.get(f"{A}/lessons/{LESSON}/durations", headers=analyst).json
    assert all(c["suppressed"] and c["median_seconds"] is None for c in durations["checkpoints"])
    series = client.get(f"{A}/events/timeseries?bucket=day&group_by=event", headers=analyst).json
    assert series["rows"] and all(r["suppressed"] and r["events"] is None for r in series["rows"])
    with db.write() as session:
        platform = ensure_platform(session, "acme").id
        for learner in ("tiny-1", "tiny-2"):
            add_check(session, platform, learner, LESSON, {}, False, 0.5, ["no_scaling"])
    mistakes = client.get(f"{A}/lessons/{LESSON}/mistakes", headers=analyst).json
    assert mistakes["mistakes"] and all(m["suppressed"] and m["times"] is None for m in mistakes["mistakes"])


def test_a_date_range_keeps_the_learners_who_started_in_it_and_the_activity_in_it(client, analyst):
    """Learner i starts at T0 + i hours: from T0 + 1 h to T0 + 6 h holds L1 to L5 (five: k)."""
    dates = f"from={(T0 + dt.timedelta(hours=1)).isoformat()}&to={(T0 + dt.timedelta(hours=6)).isoformat()}"
    dates = dates.replace("+", "%2B")
    funnel = client.get(f"{A}/lessons/{LESSON}/funnel?{dates}", headers=analyst).json
    steps = {s["checkpoint"]: s for s in funnel["steps"]}
    assert funnel["started"] == 5
    assert [steps[c]["learners"] for c in ("predict", "experiment")] == [5, 5]
    assert steps["implement"]["learners"] is None and steps["implement"]["suppressed"]  # L1-L4: four, under k
    durations = {
        r["checkpoint"]: r
        for r in client.get(f"{A}/lessons/{LESSON}/durations?{dates}", headers=analyst).json["checkpoints"]
    }
    assert durations["predict"]["learners"] == 5 and durations["predict"]["median_seconds"] == 120
    assert durations["implement"]["suppressed"]
    parameters = client.get(f"{A}/lessons/{LESSON}/parameters?{dates}", headers=analyst).json
    token = next(p for p in parameters["parameters"] if p["id"] == "token")
    assert (token["times"], token["learners"]) == (10, 5)

    later = f"from={(T0 + dt.timedelta(hours=3)).isoformat()}".replace("+", "%2B")  # L3 to L7
    funnel = client.get(f"{A}/lessons/{LESSON}/funnel?{later}", headers=analyst).json
    assert funnel["started"] == 5 and funnel["steps"][0]["learners"] is None  # predict: L3-L6, four
    parameters = client.get(f"{A}/lessons/{LESSON}/parameters?{later}", headers=analyst).json
    assert all(p["suppressed"] for p in parameters["parameters"])  # token: L3-L5, three learners
    everything = client.get(f"{A}/lessons/{LESSON}/funnel", headers=analyst).json
    assert everything["started"] == 7  # no dates: every learner


@pytest.mark.parametrize("endpoint", ["funnel", "durations", "parameters", "mistakes"])
def test_a_date_range_that_ends_before_it_starts_is_422(client, analyst, endpoint):
    query = "from=2026-11-21T00:00:00Z&to=2026-11-20T00:00:00Z"
    response = client.get(f"{A}/lessons/{LESSON}/{endpoint}?{query}", headers=analyst)
    assert response.status_code == 422 and response.json["errors"] == {"from": ["must be before 'to'"]}


def test_the_learners_language_is_in_their_rows_and_the_rows_filter_by_it(client, db, analyst):
    """Each learner row says the language the learner last read in (null if never seen); with
    `locale=` only those rows come, still a page at a time; the export says it on every event."""
    from service.db import locales

    with db.write() as session:
        acme = ensure_platform(session, "acme").id
        for learner, locale in (("L1", "es"), ("L2", "zh-CN"), ("L3", "es"), ("L5", "en")):
            locales.keep(session, acme, learner, locale, dt.datetime.now(dt.UTC))
    rows = client.get(f"{A}/learners?lesson={LESSON}", headers=analyst).json["learners"]
    assert {r["learner"]: r["locale"] for r in rows} == {
        "L1": "es",
        "L2": "zh-CN",
        "L3": "es",
        "L4": None,
        "L5": "en",
        "L6": None,
        "L7": None,
    }
    spanish = client.get(f"{A}/learners?lesson={LESSON}&locale=es&limit=1", headers=analyst).json
    assert [r["learner"] for r in spanish["learners"]] == ["L1"] and spanish["next"]
    rest = client.get(f"{A}/learners?lesson={LESSON}&locale=es&cursor={spanish['next']}", headers=analyst).json
    assert [r["learner"] for r in rest["learners"]] == ["L3"] and rest["next"] is None
    refused = client.get(f"{A}/learners?lesson={LESSON}&locale=klingon", headers=analyst)
    assert refused.status_code == 422 and "query.locale" in refused.json["errors"]
    export = client.get(f"{A}/events/export?format=ndjson", headers=analyst).get_data(as_text=True).splitlines()
    by_learner = {(e := orjson.loads(line))["learner"]: e["learner_locale"] for line in export}
    assert by_learner["L2"] == "zh-CN" and by_learner["L4"] is None
    header = client.get(f"{A}/events/export?format=csv", headers=analyst).get_data(as_text=True).splitlines()[0]
    assert "learner_locale" in header.split(",")


def test_an_empty_platform_reads_no_learners_yet_not_hidden_and_its_name(client, make_key):
    """Suppression below k protects groups that exist: with no learner at all there is no one to
    point at, so the figures are 0 ("no learners yet"), and the funnel names the key's platform."""
    funnel = client.get(f"{A}/lessons/{LESSON}/funnel", headers=make_key("initech", "analytics:read")).json
    assert funnel["platform"] == "initech" and funnel["started"] == 0
    assert all(s["learners"] == 0 for s in funnel["steps"])


def test_a_group_of_fewer_than_k_learners_is_still_hidden(client, make_key):
    headers = make_key("tiny", "events:write,analytics:read")
    client.post("/api/v1/events", json=event("only-one"), headers=headers)
    funnel = client.get(f"{A}/lessons/{LESSON}/funnel", headers=headers).json
    assert funnel["started"] is None  # one learner: hidden, not 1


@pytest.mark.parametrize(
    "query",
    ["from=9999-12-31T23:00:00Z", "to=9999-12-31T23:59:59Z", "from=1899-12-31T00:00:00Z", "from=0001-01-01T00:00:00Z"],
)
@pytest.mark.parametrize("path", ["/events/timeseries?bucket=week&", "/lessons/multi-head-attention/funnel?"])
def test_a_date_no_store_holds_is_a_422_naming_the_range_never_a_500(client, analyst, query, path):
    """A `from` near the year 9999 overflowed past the last day (500), and a date ClickHouse cannot
    hold looked like an outage (503): every store answers for 1900 to 2300, and says so."""
    refused = client.get(f"{A}{path}{query}", headers=analyst)
    assert refused.status_code == 422 and refused.mimetype == "application/problem+json"
    field = query.split("=")[0]
    said = "must be from 1900-01-01 up to 2300-01-01 (UTC), the dates analytics hold"
    assert refused.json["errors"] == {field: [said]}


def test_a_platform_with_no_learners_gets_an_empty_page_not_a_hidden_one(client, make_key):
    """None at all hides no one: the learners page says there are none, where one to k-1 is hidden."""
    analyst = make_key("empty-college", "analytics:read")
    learners = client.get(f"{A}/learners?lesson={LESSON}", headers=analyst).json
    assert learners["suppressed"] is False and learners["learners"] == [] and learners["next"] is None
