"""The query lane (chDB): every statement carries the time and memory limits, a query they
stop is a 400 naming the setting, and the lane has its own engine handle, so an insert on
the ingestion side does not queue behind a running query statement."""

from __future__ import annotations

import threading
import time

import pytest

from footfall.shared.errors import QueryTooCostlyError
from footfall.shared.warehouse import ClickHouseWarehouse
from footfall.shared.warehouse.lanes import QueryLimits

pytestmark = [pytest.mark.warehouse]

SLOW = "SELECT count() FROM numbers(20000000000) WHERE sipHash64(number) % 7 = 3"
HUNGRY = "SELECT length(groupArray(number)) FROM numbers(20000000)"  # ~160 MB of array


def test_time_and_memory_limits_stop_query_statements(warehouse: ClickHouseWarehouse) -> None:
    lane = warehouse.query_lane(QueryLimits(max_seconds=0.5, max_memory_bytes=64 * 1024**2, threads=1))
    started = time.monotonic()
    with pytest.raises(QueryTooCostlyError, match="FOOTFALL_QUERY_MAX_SECONDS") as slow:
        lane.query(SLOW)
    assert slow.value.status == 400
    assert time.monotonic() - started < 5
    with pytest.raises(QueryTooCostlyError, match="FOOTFALL_QUERY_MAX_MEMORY_BYTES"):
        lane.query(HUNGRY)
    # the same client without the lane (ingestion) is not bound by them
    assert warehouse.query(HUNGRY) == [(20_000_000,)]
    assert lane.query("SELECT 1") == [(1,)]  # the lane still serves after a refusal


def test_ingestion_does_not_wait_for_a_running_query(warehouse: ClickHouseWarehouse) -> None:
    lane = warehouse.query_lane(QueryLimits(max_seconds=3.0, max_memory_bytes=0, threads=1))
    stopped: list[BaseException] = []

    def query() -> None:
        try:
            lane.query(SLOW)
        except QueryTooCostlyError as exc:
            stopped.append(exc)

    running = threading.Thread(target=query)
    running.start()
    time.sleep(0.3)  # the query statement holds its handle for 3 s
    started = time.monotonic()
    for _ in range(5):
        assert warehouse.query("SELECT 1") == [(1,)]
    waited = time.monotonic() - started
    running.join()
    assert len(stopped) == 1  # the query ran (and was stopped by its limit) meanwhile
    assert waited < 1.5, f"ingestion's statements waited {waited:.2f} s for the query's"
