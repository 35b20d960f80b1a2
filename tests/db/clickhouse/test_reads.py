"""The analytics reads on ClickHouse (service/db/clickhouse/reads.py): a known cohort loaded through
the API and synced answers every analytics endpoint with the same JSON as the SQL store, with and
without dates; a platform sees its own learners only; groups under k stay suppressed; a store out of
reach is a 503 that names no host."""

import os

import pytest

from service.app import create_app
from service.db.clickhouse import ClickHouse
from service.db.clickhouse.schema import migrate
from service.db.clickhouse.sync import sync
from service.db.tables import Event

from .cohort import LESSON, answers, load_cohort

pytest.importorskip("chdb", reason="chdb (the dev extra) runs ClickHouse in this process")
pytestmark = pytest.mark.databases


def test_every_endpoint_answers_the_same_json_from_clickhouse(app, ch_app, acme, store):
    load_cohort(app, acme, learners=60, seed=3)
    copied = sync(app.extensions["db"], store)
    with app.extensions["db"].read() as session:
        assert copied["events"] == session.query(Event).count() > 1000
    sql, clickhouse = answers(app, acme), answers(ch_app, acme)
    assert sql.keys() == clickhouse.keys()
    for key in sql:
        assert clickhouse[key] == sql[key], key
    # The cohort is large enough that the comparison is of figures, not of suppressed rows.
    assert sql[("funnel", 0)]["started"] == 60
    assert any(not row["suppressed"] for row in sql[("durations", 0)]["checkpoints"])
    assert sql[("mistakes", 0)]["mistakes"] and sql["items"]["items"]
    assert len(sql["export"].splitlines()) == copied["events"]


def test_a_platform_sees_its_own_learners_only(app, ch_app, acme, globex, store):
    load_cohort(app, acme, learners=15, seed=9)
    sync(app.extensions["db"], store)
    theirs = answers(ch_app, globex)
    assert theirs == answers(app, globex)
    assert theirs[("funnel", 0)]["started"] == 0 and theirs["export"] == ""


def test_groups_under_k_stay_suppressed(app_config, ch_url, acme, store):
    strict = create_app({**app_config, "k_anonymity": 50})
    strict_ch = create_app({**app_config, "k_anonymity": 50, "analytics_url": ch_url})
    load_cohort(strict, acme, learners=20, seed=13)
    sync(strict.extensions["db"], store)
    body = answers(strict_ch, acme)
    assert body == answers(strict, acme)
    assert body[("funnel", 0)]["started"] is None and body[("learners", None)][0]["suppressed"]


@pytest.mark.skipif(
    not os.environ.get("WORKBENCH_TEST_CLICKHOUSE_URL"),
    reason="no ClickHouse server: set WORKBENCH_TEST_CLICKHOUSE_URL=clickhouse://user:password@host:8123/db",
)
def test_the_same_sql_runs_on_a_clickhouse_server(app, app_config, acme):
    url = os.environ["WORKBENCH_TEST_CLICKHOUSE_URL"]
    server = ClickHouse(url)
    server.command("DROP DATABASE IF EXISTS {db}")
    migrate(server)
    load_cohort(app, acme, learners=40, seed=17)
    sync(app.extensions["db"], server)
    on_server = create_app({**app_config, "analytics_url": url})
    assert answers(on_server, acme) == answers(app, acme)


def test_an_analytics_url_of_another_kind_stops_start_up_without_its_password(app_config):
    from service.config import ConfigError

    with pytest.raises(ConfigError, match="WORKBENCH_ANALYTICS_URL") as refused:
        create_app({**app_config, "analytics_url": "mysql://admin:s3cret@db:3306/x"})
    assert "s3cret" not in str(refused.value)


def test_a_store_out_of_reach_is_a_503_that_names_no_host(app_config, acme):
    """Every analytics read (and the export) answers 503 problem+json saying to try again; the
    driver's words (host, port, SQL) stay in the log."""
    down = create_app({**app_config, "analytics_url": "clickhouse://reader:hunter2@127.0.0.1:1/analytics"})
    client = down.test_client()
    for path in (
        f"/api/v1/analytics/lessons/{LESSON}/funnel",
        f"/api/v1/analytics/lessons/{LESSON}/items",
        "/api/v1/analytics/events/timeseries",
        "/api/v1/analytics/events/export",
    ):
        response = client.get(path, headers=acme)
        assert response.status_code == 503, (path, response.status_code)
        assert response.mimetype == "application/problem+json" and response.headers["Retry-After"]
        said = response.get_data(as_text=True)
        assert "127.0.0.1" not in said and "hunter2" not in said and "SELECT" not in said


def test_a_date_clickhouse_cannot_hold_is_the_clients_error_not_an_outage(ch_app, acme):
    """ClickHouse holds 1900 to 2299: a date outside is a 422 naming the range, as on the SQL store
    (it was a 503 with Retry-After, as if the store were down)."""
    client = ch_app.test_client()
    for query in ("from=1899-06-01T00:00:00Z", "to=2301-01-01T00:00:00Z"):
        answer = client.get(f"/api/v1/analytics/events/timeseries?{query}", headers=acme)
        assert answer.status_code == 422 and "Retry-After" not in answer.headers
