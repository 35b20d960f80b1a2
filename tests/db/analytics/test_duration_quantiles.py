"""The quantiles of time to complete, computed in the database from the duration rollups, equal
numpy's over the same learners, whatever the counts."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import delete, insert

from service.db.analytics.duration_quantiles import duration_quantiles
from service.db.engine import Database
from service.db.platforms import ensure_platform
from service.db.tables import DurationRollup

pytestmark = pytest.mark.databases
QS = (0.5, 0.9, 0.25, 0.99)
counts = st.dictionaries(st.integers(0, 400), st.integers(1, 6), min_size=1, max_size=30)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(per_checkpoint=st.dictionaries(st.sampled_from(["predict", "explain", "implement"]), counts, min_size=1))
def test_each_checkpoints_quantiles_equal_numpys(database_url, per_checkpoint):
    db = Database(database_url)
    with db.write() as session:
        platform = ensure_platform(session, "acme").id
        session.execute(delete(DurationRollup))
        rows = [
            {"platform_id": platform, "lesson": "m", "checkpoint": c, "seconds": s, "learners": n}
            for c, seconds in per_checkpoint.items()
            for s, n in seconds.items()
        ]
        session.execute(insert(DurationRollup), rows)
    with db.snapshot() as session:
        got = duration_quantiles(session.connection(), platform, "m", QS)
    db.dispose()
    assert set(got) == set(per_checkpoint)
    for checkpoint, seconds in per_checkpoint.items():
        values = [s for s, n in sorted(seconds.items()) for _ in range(n)]
        n, quantiles = got[checkpoint]
        assert n == len(values) and np.allclose(quantiles, np.quantile(values, QS)), checkpoint
