"""ClickHouse unreachable: the worker retries the batch with backoff and commits nothing;
stopped during the outage it abandons the batch (still nothing committed); once the
warehouse is back every event is stored exactly once."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.distributed import run_driver

pytestmark = [pytest.mark.kafka, pytest.mark.redis, pytest.mark.timeout(180)]


def test_warehouse_outage_loses_nothing_and_commits_nothing(
    tmp_path: Path, kafka_bootstrap: str, redis_url: str
) -> None:
    result = run_driver("warehouse-outage", "--kafka", kafka_bootstrap, "--redis", redis_url, "--data", str(tmp_path))

    assert result["retries"] >= 3
    assert result["rows_while_down"] == 0
    assert result["lag_while_down"] == 3000, "nothing committed while inserts fail"
    assert result["lag_after_stop"] == 3000, "a stop during the outage commits nothing"
    assert result["stop_seconds"] < 15
    assert result["unique"] == result["final"] == result["sent"]
