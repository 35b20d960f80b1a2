"""One protocol for the analytics stores (service/db/stores.py): the same reads from either, chosen
outside both, and what each does around an erasure."""

from __future__ import annotations

import inspect

import pytest

from service.db.analytics.reader import SqlReader, SqlStore
from service.db.clickhouse import ClickHouseStore
from service.db.clickhouse.reads import ClickHouseReader
from service.db.stores import AnalyticsStore, store_of


def public(cls) -> dict[str, inspect.Signature]:
    return {name: inspect.signature(f) for name, f in vars(cls).items() if callable(f) and not name.startswith("_")}


def test_both_readers_answer_the_same_reads_with_the_same_arguments():
    sql, clickhouse = public(SqlReader), public(ClickHouseReader)
    missing = sorted(set(sql) - set(clickhouse))
    assert missing == []
    for name, signature in sql.items():
        assert list(signature.parameters) == list(clickhouse[name].parameters), name


@pytest.mark.parametrize("store", [SqlStore, ClickHouseStore])
def test_each_store_keeps_the_protocol(store):
    wanted = {name for name in vars(AnalyticsStore) if not name.startswith("_")} | {"queues_erasures"}
    assert wanted <= set(dir(store))


def test_without_an_analytics_url_the_primary_database_answers(app):
    store = store_of(app)
    assert isinstance(store, SqlStore) and not store.queues_erasures
    assert store_of(app) is store  # made once


def test_with_chdb_configured_clickhouse_answers_and_erasures_are_queued_for_it(app_config, tmp_path):
    pytest.importorskip("chdb", reason="chDB is the dev extra's (pip install -e '.[dev]')")
    from service.app import create_app

    app = create_app({**app_config, "analytics_url": f"chdb:///{tmp_path / 'ch'}"})
    store = store_of(app)
    assert isinstance(store, ClickHouseStore) and store.queues_erasures
    app.extensions["db"].dispose()
