"""The query lane's limits: rendered as per-statement settings, and a statement they stop
is a 400 naming the setting (a server out of memory is not the query's fault: no 400)."""

from __future__ import annotations

from footfall.shared.warehouse.client import WarehouseError
from footfall.shared.warehouse.lanes import QueryLimits, too_costly


def test_limits_render_as_settings_and_stopped_queries_as_400() -> None:
    limits = QueryLimits(max_seconds=2.5, max_memory_bytes=1000, threads=1)
    assert limits.settings() == {"max_execution_time": 2.5, "max_memory_usage": 1000}
    assert QueryLimits(0, 0).settings() == {}
    timeout = too_costly(WarehouseError("Code: 159. DB::Exception: Timeout exceeded: elapsed 2.6 s"), limits)
    assert timeout is not None and timeout.status == 400 and "FOOTFALL_QUERY_MAX_SECONDS" in timeout.message
    memory = WarehouseError("Code: 241. DB::Exception: Query memory limit exceeded: would use 1.00 MiB")
    refused = too_costly(memory, limits)
    assert refused is not None and "FOOTFALL_QUERY_MAX_MEMORY_BYTES" in refused.message
    server = WarehouseError("Code: 241. DB::Exception: Memory limit (total) exceeded")
    assert too_costly(server, limits) is None  # the server's memory is not this query's fault: 503
    assert too_costly(WarehouseError("Code: 62. Syntax error"), limits) is None
