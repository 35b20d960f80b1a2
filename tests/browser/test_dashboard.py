"""An instructor reads the dashboard with an analytics key (kept for the tab only)."""

from pathlib import Path

import pytest
import requests
from playwright.sync_api import expect

from .conftest import VIEWPORTS, demo_cohort, open_page


def test_the_dashboard_shows_the_funnel_and_tables(page, live):
    (token,) = demo_cohort(live, 60, 3, "school")
    open_page(page, live, "/dashboard")
    page.get_by_label("Analytics key (kept for this tab only)").fill(token)
    page.get_by_role("button", name="Show analytics").click()
    page.locator("#funnel table").wait_for(state="attached")
    rows = page.locator("#funnel table tbody tr")
    assert rows.count() == 5
    assert rows.nth(0).locator("td").first.text_content() == "60"
    for section in ("durations", "timeseries", "parameters", "mistakes"):
        assert page.locator(f"#{section} table tbody tr").count() > 0
    assert page.evaluate("sessionStorage.getItem('workbench.analyticsKey')") == token
    assert page.evaluate("localStorage.getItem('workbench.analyticsKey')") is None
    page.reload()
    page.locator("#funnel table").wait_for(state="attached")  # kept for the tab


def test_a_wrong_key_says_so(page, live):
    open_page(page, live, "/dashboard")
    page.get_by_label("Analytics key (kept for this tab only)").fill("wb_00000000_" + "x" * 43)
    page.get_by_role("button", name="Show analytics").click()
    page.get_by_text("Could not load analytics").wait_for()


def test_the_dashboard_counts_verified_and_reported_implement_results_apart(page, live):
    from ..api.test_challenges import reference_answers

    reader, writer = demo_cohort(live, 60, 5, "college", "analytics:read", "events:write")
    auth = {"Authorization": f"Bearer {writer}"}

    def implement_step():
        funnel = requests.get(
            f"{live.url}/api/v1/analytics/lessons/multi-head-attention/funnel",
            headers={"Authorization": f"Bearer {reader}"},
        ).json()
        return next(s for s in funnel["steps"] if s["checkpoint"] == "implement")

    demo = implement_step()  # the demo cohort's own: mostly verified, some reported
    for learner in ("v1", "v2", "v3", "v4", "v5"):  # five learners solve a challenge: k is 5
        challenge = requests.post(
            f"{live.url}/api/v1/exercises/multi-head-attention/challenges", json={"learner": learner}, headers=auth
        ).json()
        verdict = requests.post(challenge["answers_url"], json={"answers": reference_answers(challenge["cases"])})
        assert verdict.json()["correct"]
    step = implement_step()
    assert step["verified"] == demo["verified"] + 5 and step["reported"] == demo["reported"]
    assert step["reported"] is None  # the few the platform reported: under k, hidden
    open_page(page, live, "/dashboard")
    page.get_by_label("Analytics key (kept for this tab only)").fill(reader)
    page.get_by_role("button", name="Show analytics").click()
    rows = page.locator("#implement table tbody tr")
    rows.first.wait_for(state="attached")
    shown = {rows.nth(i).locator("th").text_content(): rows.nth(i).locator("td").first.text_content() for i in range(2)}
    assert shown["verified by the server (challenge)"] == str(step["verified"])
    assert shown["reported by the platform"] == "hidden: fewer than 5 learners"


def test_hidden_groups_say_so_and_exports_download_what_the_api_returns(page, live):
    (token,) = demo_cohort(live, 3, 9, "hamlet")  # three learners: under k
    open_page(page, live, "/dashboard")
    page.get_by_label("Analytics key (kept for this tab only)").fill(token)
    page.get_by_role("button", name="Show analytics").click()
    page.locator("#funnel table").wait_for(state="attached")
    cells = page.locator("#funnel table tbody td:first-of-type").all_text_contents()
    assert cells and all(text == "hidden: fewer than 5 learners" for text in cells)
    assert "0" not in cells
    rows = page.locator("#timeseries table tbody tr")
    shown = {
        rows.nth(i).locator("th").text_content(): rows.nth(i).locator("td").first.text_content()
        for i in range(rows.count())
    }
    series = requests.get(
        f"{live.url}/api/v1/analytics/events/timeseries?bucket=day&lesson=multi-head-attention",
        headers={"Authorization": f"Bearer {token}"},
    ).json()["rows"]
    active = {row["bucket"][:10] for row in series if row["bucket"][:10] in shown}
    assert active and all(shown[day] == "hidden: fewer than 5 learners" for day in active)  # never a 0 bar
    assert all(shown[day] == "0" for day in set(shown) - active)  # days without any event: a true 0
    assert page.locator("#timeseries svg rect.hidden-day").count() == len(active)
    api = requests.get(
        f"{live.url}/api/v1/analytics/events/export?format=ndjson", headers={"Authorization": f"Bearer {token}"}
    ).text
    with page.expect_download() as info:
        page.get_by_role("button", name="NDJSON").click()
    assert Path(info.value.path()).read_text() == api and api.count("\n") > 3


def test_the_date_range_and_lesson_picker_change_what_is_drawn_and_learners_page_through(page, live):
    (token,) = demo_cohort(live, 45, 11, "academy")  # first events spread over the last 14 days
    lessons = requests.get(f"{live.url}/api/v1/lessons").json()["lessons"]
    open_page(page, live, "/dashboard#range=all")
    page.get_by_label("Analytics key (kept for this tab only)").fill(token)
    page.get_by_role("button", name="Show analytics").click()
    page.locator("#timeseries table").wait_for(state="attached")
    picker = page.get_by_label("Lesson")
    assert picker.locator("option").all_text_contents() == [lesson["title"] for lesson in lessons]
    started_all = page.locator("#funnel table tbody td").first.text_content()
    all_days = page.locator("#timeseries table tbody th").all_text_contents()
    assert len(all_days) > 7 and all_days == sorted(all_days)
    assert page.locator("#timeseries svg text.tick").first.text_content() == "0"  # a y axis from 0
    page.get_by_label("Period").select_option("7")
    expect(page.locator("#timeseries h2")).to_contain_text("last 7 days")
    week = page.locator("#timeseries table tbody th").all_text_contents()
    assert 0 < len(week) <= 7 and set(week) <= set(all_days) and week == all_days[-len(week) :]
    assert "range=7" in page.evaluate("location.hash")
    import datetime as dt

    week_start = dt.datetime.now(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0) - dt.timedelta(days=6)
    api = requests.get(
        f"{live.url}/api/v1/analytics/lessons/{lessons[0]['id']}/funnel",
        params={"from": week_start.isoformat()},
        headers={"Authorization": f"Bearer {token}"},
    ).json()
    expect(page.locator("#funnel h2")).to_contain_text("learners who started in the last 7 days")
    started_week = page.locator("#funnel table tbody td").first.text_content()
    assert started_week == (str(api["started"]) if api["started"] is not None else "hidden: fewer than 5 learners")
    assert started_all == "45" and started_week != started_all

    reader = {"Authorization": f"Bearer {token}"}
    first = requests.get(
        f"{live.url}/api/v1/analytics/learners?lesson={lessons[0]['id']}&limit=20", headers=reader
    ).json()
    rows = page.locator("#learners tbody tr")
    assert rows.count() == 20
    assert rows.locator("th").all_text_contents() == [row["learner"] for row in first["learners"]]
    page.get_by_role("button", name="More learners").click()
    expect(rows).to_have_count(40)
    page.get_by_role("button", name="More learners").click()
    expect(rows).to_have_count(45)
    assert page.get_by_role("button", name="More learners").is_hidden()
    assert page.get_by_text("workbench keys create --platform NAME --scopes analytics:read").is_visible()
    clipped = page.evaluate(
        """() => [...document.querySelectorAll("svg.chart")].flatMap((chart) => {
            const width = chart.viewBox.baseVal.width;
            const out = (t) => { const b = t.getBBox(); return b.x < 0 || b.x + b.width > width + 0.5; };
            return [...chart.querySelectorAll("text")].filter(out).map((t) => t.textContent); })"""
    )
    assert clipped == []  # every label and value in full inside its chart


def _show(page, live, token):
    open_page(page, live, "/dashboard")
    page.get_by_label("Analytics key (kept for this tab only)").fill(token)
    page.get_by_role("button", name="Show analytics").click()
    page.locator("#learners tbody tr").first.wait_for()


def test_charts_come_first_with_each_tables_one_keystroke_away(page, live):
    """At 1280x800 every chart fits in two screens; a chart's table opens from the keyboard."""
    (token,) = demo_cohort(live, 150, 21, "two-screens")
    page.set_viewport_size({"width": 1280, "height": 800})
    _show(page, live, token)
    charts = page.locator("#charts .chart-block:not(#learners)")
    assert charts.count() >= 6
    boxes = [charts.nth(i).bounding_box() for i in range(charts.count())]
    top, bottom = min(b["y"] for b in boxes), max(b["y"] + b["height"] for b in boxes)
    assert bottom - top <= 2 * 800, f"the charts take {bottom - top:.0f} px"
    assert page.locator("details.numbers[open]").count() == 0
    assert not page.locator("#funnel table").is_visible()
    page.locator("#funnel summary").focus()
    page.keyboard.press("Enter")
    expect(page.locator("#funnel table")).to_be_visible()
    assert page.locator("#funnel table tbody tr").first.locator("td").first.inner_text() == "150"
    assert not page.locator("#durations table").is_visible()  # each chart its own table
    labels = page.locator("#durations svg text tspan").all_text_contents()
    assert "Record your prediction" in " ".join(labels) and "predict" not in labels  # titles, as the funnel
    why = page.locator("#why-hidden")
    why.locator("summary").click()
    expect(why).to_contain_text("fewer than 5 learners")
    expect(why).to_contain_text("your platform's own raw data")


def test_an_instructor_reads_one_learners_prediction_and_explanation(page, live):
    from axe_playwright_python.sync_playwright import Axe

    (reader,) = demo_cohort(live, 40, 23, "seminar", "analytics:read,progress:read")
    _show(page, live, reader)
    auth = {"Authorization": f"Bearer {reader}"}
    learners = requests.get(
        f"{live.url}/api/v1/analytics/learners?lesson=multi-head-attention&limit=20", headers=auth
    ).json()["learners"]
    progress = {}
    for row in learners:  # one who wrote both texts
        states = requests.get(f"{live.url}/api/v1/learners/{row['learner']}/progress", headers=auth).json()
        progress = {c["id"]: c for c in states["lessons"][0]["checkpoints"]}
        if progress["predict"]["response"] and progress["explain"]["response"]:
            learner = row["learner"]
            break
    button = page.get_by_role("button", name=f"Read {learner}'s prediction and explanation")
    button.click()
    words = page.get_by_label(f"{learner}'s words")
    expect(words).to_contain_text(progress["predict"]["response"])
    expect(words).to_contain_text(progress["explain"]["response"])
    assert words.locator("dt").all_inner_texts() == [
        "Record your prediction",
        "Explain the result and one failure mode",
    ]
    assert button.get_attribute("aria-expanded") == "true"
    results = Axe().run(page)
    serious = [v for v in results.response["violations"] if v["impact"] in ("serious", "critical")]
    assert not serious, [(v["id"], [n["target"] for n in v["nodes"]][:3]) for v in serious]
    button.click()
    expect(words).to_have_count(0)


def test_a_key_without_progress_read_says_what_reading_texts_needs(page, live):
    (token,) = demo_cohort(live, 30, 25, "workshop")  # analytics:read alone
    _show(page, live, token)
    page.locator("#learners tbody tr").first.get_by_role("button").click()
    expect(page.locator("tr.learner-texts")).to_contain_text("needs the progress:read scope")


def test_the_learners_table_shows_each_learners_language_and_filters_by_it(page, live):
    (token,) = demo_cohort(live, 30, 5, "polyglot-school")
    _show(page, live, token)
    reader = {"Authorization": f"Bearer {token}"}
    api = requests.get(
        f"{live.url}/api/v1/analytics/learners?lesson=multi-head-attention&locale=es&limit=100", headers=reader
    ).json()["learners"]
    assert 0 < len(api) < 30  # the demo cohort reads in three languages
    language = page.locator("#learners tbody tr td:nth-child(2)")
    assert {"English", "Español"} <= set(language.all_text_contents())
    page.get_by_label("Learners' language").select_option("es")
    expect(page.locator("#learners tbody tr")).to_have_count(len(api))
    assert set(page.locator("#learners tbody tr td:nth-child(2)").all_text_contents()) == {"Español"}
    assert page.locator("#learners tbody tr th").all_text_contents() == [r["learner"] for r in api]
    assert "locale=es" in page.evaluate("location.hash")


@pytest.mark.parametrize("size", VIEWPORTS)
def test_the_first_screen_names_the_platform_and_says_when_it_has_no_learners_yet(page, live, size):
    """An empty platform reads "no learners yet" (suppression is for groups that exist), with its
    name, and no chart; a platform with learners reads its name and no such line."""
    from service.db import Database
    from service.db.platforms import create_key

    db = Database(live.env["WORKBENCH_DATABASE_URL"])
    with db.write() as session:
        empty, _ = create_key(session, "empty-college", frozenset({"analytics:read"}))
    db.dispose()
    page.set_viewport_size(VIEWPORTS[size])
    open_page(page, live, "/dashboard")
    page.get_by_label("Analytics key (kept for this tab only)").fill(empty.token)
    page.get_by_role("button", name="Show analytics").click()
    page.locator("#platform").wait_for()
    assert page.locator("#platform").inner_text() == "Platform: empty-college"
    assert page.locator("#no-learners[data-empty=true]").is_visible()
    assert "No learners yet" in page.locator("#no-learners").inner_text()
    # a figure over nobody is not drawn: no chart, and not one "hidden: fewer than 5 learners"
    assert page.locator("svg.chart").count() == 0 and page.locator("#why-hidden").count() == 0
    assert "fewer than" not in page.locator("#charts").inner_text()
    (token,) = demo_cohort(live, 12, 4, "busy-school")
    page.get_by_label("Analytics key (kept for this tab only)").fill(token)
    page.get_by_role("button", name="Show analytics").click()
    expect(page.locator("#platform")).to_have_text("Platform: busy-school")
    assert page.locator("#no-learners").count() == 0
    # nothing where the line was: the platform's name, then the privacy note (once, a stray "null")
    assert page.locator("#platform").evaluate("(p) => p.nextSibling.nodeName") == "DETAILS"
