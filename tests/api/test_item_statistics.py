"""GET /analytics/lessons/{lesson}/items: correct rates, point-biserial discrimination and Hake's
normalized gain for a known cohort, checked against a plain implementation over the raw answers
(latest answer per learner, item and phase); the same whether the answers are rolled up, after
the watermark, or both; suppressed under k; a platform's own learners only; erasure takes a
learner out."""

import datetime as dt
import random
import statistics

import pytest

from service.db.analytics.rollup_refresh import refresh
from service.lessons import load_catalog

from .helpers import LESSON, answered

pytestmark = pytest.mark.databases

LESSON_ITEMS = load_catalog("content/lessons")[LESSON].items
START = dt.datetime.now(dt.UTC) - dt.timedelta(hours=3)


def answer(learner, item, response, phase, minute) -> dict:
    return answered(item, response, phase, learner, occurred_at=(START + dt.timedelta(minutes=minute)).isoformat())


def cohort(seed: int, learners: int) -> list[dict]:
    """Learners who answer pre then post, better after than before, some changing their mind,
    some skipping an item, one answering only before."""
    rng = random.Random(seed)
    events = []
    for n in range(learners):
        learner, skill = f"learner-{n:02d}", rng.random()
        for phase, boost, minute in (("pre", 0.0, 0), ("post", 0.35, 60)):
            if phase == "post" and n == 0:
                continue  # answered before the workbench only
            for i, item in enumerate(it for it in LESSON_ITEMS if it.asked_in(phase)):
                if n == 1 and i == 2:
                    continue  # skipped one
                right = rng.random() < 0.25 + 0.5 * skill + boost
                if item.kind == "number":
                    response = item.value if right else rng.choice([4, 8, 1])
                else:
                    wrong = [c.id for c in item.choices if c.id != item.answer]
                    response = item.answer if right else rng.choice(wrong)
                if rng.random() < 0.15:  # a first thought, changed a minute later: the latest counts
                    first = item.answer if item.kind == "choice" else item.value
                    events.append(answer(learner, item.id, first, phase, minute + i))
                    minute += 1
                events.append(answer(learner, item.id, response, phase, minute + i))
    return events


def expected(events: list[dict], k: int) -> dict:
    """The figures, computed plainly from the answers themselves."""
    latest: dict[tuple[str, str, str], tuple[str, object]] = {}
    for e in sorted(events, key=lambda e: e["occurred_at"]):
        latest[(e["learner"], e["item"], e["data"]["phase"])] = e["data"]["response"]
    items = {i.id: i for i in LESSON_ITEMS}

    def right(item_id, response) -> int:
        item = items[item_id]
        if item.kind == "number":
            return int(abs(response - item.value) <= item.tolerance)
        return int(response == item.answer)

    scores: dict[tuple[str, str], dict[str, int]] = {}
    for (learner, item_id, phase), response in latest.items():
        scores.setdefault((learner, phase), {})[item_id] = right(item_id, response)
    rows = {}
    for phase in ("pre", "post"):
        for item in (i for i in LESSON_ITEMS if i.asked_in(phase)):
            pairs = [
                (s[item.id], sum(s.values()) - s[item.id])
                for (learner, p), s in scores.items()
                if p == phase and item.id in s
            ]
            xs, ys = [x for x, _ in pairs], [y for _, y in pairs]
            try:
                r = statistics.correlation(xs, ys)
            except statistics.StatisticsError:
                r = None
            # The rate says how many were right: shown when the right and the wrong are each k or more, or none.
            safe = sum(xs) in (0, len(xs)) or k <= sum(xs) <= len(xs) - k
            rate = round(sum(xs) / len(xs), 4) if safe else None
            rows[(item.id, phase)] = (len(pairs), rate, None if r is None or not safe else round(r, 4))
    n_pre = sum(i.asked_in("pre") for i in LESSON_ITEMS)
    n_post = sum(i.asked_in("post") for i in LESSON_ITEMS)
    complete = [
        learner
        for (learner, phase), s in scores.items()
        if phase == "pre" and len(s) == n_pre and len(scores.get((learner, "post"), {})) == n_post
    ]
    pre = statistics.fmean(sum(scores[(lr, "pre")].values()) / n_pre for lr in complete)
    post = statistics.fmean(sum(scores[(lr, "post")].values()) / n_post for lr in complete)
    return {"rows": rows, "gain": (len(complete), round(pre, 4), round(post, 4), round((post - pre) / (1 - pre), 4))}


def figures(client, headers) -> dict:
    response = client.get(f"/api/v1/analytics/lessons/{LESSON}/items", headers=headers)
    assert response.status_code == 200, response.json
    return response.json


def assert_matches(body: dict, want: dict) -> None:
    got = {(r["id"], r["phase"]): (r["learners"], r["correct_rate"], r["discrimination"]) for r in body["items"]}
    assert got == want["rows"]
    gain = body["gain"]
    assert (gain["learners"], gain["pre_mean"], gain["post_mean"], gain["normalized_gain"]) == want["gain"]
    assert gain["normalized_gain"] > 0  # the cohort learned


def post_all(client, headers, events):
    for i in range(0, len(events), 200):
        response = client.post("/api/v1/events", json={"events": events[i : i + 200]}, headers=headers)
        assert response.status_code == 201, response.json


def test_figures_match_a_plain_computation_rolled_up_after_the_watermark_and_both(app, client, acme):
    events = cohort(seed=7, learners=24)
    want = expected(events, 5)
    half = len(events) // 2
    post_all(client, acme, events[:half])
    refresh(app.extensions["db"])  # half rolled up, the rest read after the watermark
    post_all(client, acme, events[half:])
    assert_matches(figures(client, acme), want)
    refresh(app.extensions["db"])
    body = figures(client, acme)
    assert_matches(body, want)
    shapes = next(r for r in body["items"] if r["id"] == "head-shapes")
    chosen = {c["id"]: c["count"] for c in shapes["choices"]}
    assert sum(c or 0 for c in chosen.values()) <= shapes["learners"]
    assert all(c["misconception"] for c in shapes["choices"] if not c["correct"])


def test_a_replayed_batch_changes_nothing(app, client, acme):
    events = cohort(seed=3, learners=12)
    post_all(client, acme, events)
    refresh(app.extensions["db"])
    before = figures(client, acme)
    for i in range(0, len(events), 200):
        assert client.post("/api/v1/events", json={"events": events[i : i + 200]}, headers=acme).status_code == 200
    refresh(app.extensions["db"])
    assert figures(client, acme) == before


def test_groups_under_k_are_suppressed(app_config):
    from service.app import create_app
    from service.db.platforms import create_key

    strict = create_app({**app_config, "k_anonymity": 50})
    client = strict.test_client()

    with strict.extensions["db"].write() as s:
        key, _ = create_key(s, "acme", frozenset({"events:write", "analytics:read"}))
    headers = {"Authorization": f"Bearer {key.token}"}
    post_all(client, headers, cohort(seed=5, learners=10))
    body = figures(client, headers)
    assert body["k"] == 50 and all(r["suppressed"] and r["correct_rate"] is None for r in body["items"])
    assert all(c["count"] is None for r in body["items"] for c in r["choices"])
    assert body["gain"]["suppressed"] and body["gain"]["normalized_gain"] is None
    strict.extensions["db"].dispose()


def test_a_platform_sees_its_own_learners_only(client, acme, globex):
    post_all(client, acme, cohort(seed=11, learners=12))
    body = figures(client, globex)
    assert all(r["learners"] is None for r in body["items"]) and body["gain"]["learners"] is None


def test_an_erased_learner_leaves_the_figures(app, client, acme):
    events = cohort(seed=13, learners=14)
    post_all(client, acme, events)
    refresh(app.extensions["db"])
    assert client.delete("/api/v1/learners/learner-05", headers=acme).status_code == 200
    remaining = [e for e in events if e["learner"] != "learner-05"]
    assert_matches(figures(client, acme), expected(remaining, 5))


def test_a_rare_number_answer_is_never_listed_and_no_hidden_count_is_a_difference(client, acme):
    """Six learners answer 2 (right), five answer 4 and one answers 7 (wrong): 7 is never named, it
    is counted with the other wrong answers, and since the learners, the right and the wrong are
    shown, hiding that one count would not hide it: 4's count is hidden too."""
    responses = [2] * 6 + [4] * 5 + [7]
    post_all(client, acme, [answer(f"learner-{n}", "head-width", r, "pre", n) for n, r in enumerate(responses)])
    row = next(r for r in figures(client, acme)["items"] if (r["id"], r["phase"]) == ("head-width", "pre"))
    assert (row["learners"], row["correct_rate"]) == (12, 0.5)
    assert {c["id"]: (c["count"], c["correct"]) for c in row["choices"]} == {
        "2.0": (6, True),
        "4.0": (None, False),
        "other-wrong": (None, False),
    }
    assert [c["text"] for c in row["choices"] if c["id"] == "other-wrong"] == ["other wrong answers"]


@pytest.mark.parametrize("seed", range(6))
def test_no_shown_figure_identifies_fewer_than_k_learners(client, acme, seed):
    """Over a cohort: every count shown is 0 or at least k; every number named was given by at
    least k learners; and no hidden count is the difference of shown ones (within the learners,
    and within the right and the wrong when the rate is shown, at least two are hidden or none)."""
    k, events = 5, cohort(seed=seed, learners=11 + seed)
    post_all(client, acme, events)
    latest: dict[tuple[str, str, str], object] = {}
    for e in sorted(events, key=lambda e: e["occurred_at"]):
        latest[(e["learner"], e["item"], e["data"]["phase"])] = e["data"]["response"]
    for row in figures(client, acme)["items"]:
        if row["suppressed"]:
            continue
        given = [r for (_, i, p), r in latest.items() if (i, p) == (row["id"], row["phase"])]
        for choice in row["choices"]:
            assert choice["count"] is None or choice["count"] == 0 or choice["count"] >= k, (row["id"], choice)
            if row["kind"] == "number" and not choice["id"].startswith("other-"):
                assert sum(float(r) == float(choice["id"]) for r in given) >= k, (row["id"], choice)
        groups = [row["choices"]]
        if row["correct_rate"] is not None:
            groups += [[c for c in row["choices"] if c["correct"]], [c for c in row["choices"] if not c["correct"]]]
        for group in groups:
            assert sum(c["count"] is None for c in group) != 1, (row["id"], row["phase"], row["choices"])


def test_a_number_is_one_response_however_it_is_written(client, acme):
    events = [answer(f"learner-{n}", "head-width", 2 if n % 2 else 2.0, "pre", n) for n in range(6)]
    post_all(client, acme, events)
    row = next(r for r in figures(client, acme)["items"] if (r["id"], r["phase"]) == ("head-width", "pre"))
    assert [(c["id"], c["count"], c["correct"]) for c in row["choices"]] == [("2.0", 6, True)]
    assert [c["text"] for c in row["choices"]] == ["2"]  # as a learner writes it


def test_a_number_answer_reads_as_written_and_a_fraction_keeps_its_digits(client, acme):
    events = [answer(f"learner-{n}", "head-width", 2.5, "pre", n) for n in range(5)]
    events += [answer(f"learner-{n}", "head-width", 3, "pre", n) for n in range(5, 10)]
    post_all(client, acme, events)
    row = next(r for r in figures(client, acme)["items"] if (r["id"], r["phase"]) == ("head-width", "pre"))
    assert {c["id"]: c["text"] for c in row["choices"]} == {"2.5": "2.5", "3.0": "3"}
