"""Lanes: ingestion and queries each get their own share of the warehouse.

The warehouse object a process opens is the ingestion lane: its thread pool (`run`) and
its statements serve `/import`, `/track`, the workers, the metadata and the management
interface. Queries (the query interface's reports and raw export) go through a
`QueryLane` made from it by `warehouse.query_lane(limits)` (`query_routes`):

* its own client (`ClickHouseWarehouse.query_lane`) and thread pool
  (`QueryLimits.threads`), so a burst of exports or slow reports cannot take the
  threads or the connection that ingestion waits on. With chDB this matters most: one
  engine handle runs one statement at a time, so with a shared handle an `/import`
  queued behind every running export page (measured: p99 1.9 s under 12 exports);
  the lane's own handle runs beside ingestion's (both share only the CPU);
* every statement it sends carries `max_execution_time` and `max_memory_usage`
  (`QueryLimits.max_seconds`, `max_memory_bytes`; 0 leaves the server's default); a
  query stopped by either is a 400 naming the limit (`QueryTooCostlyError`): retrying
  the same query cannot succeed, so it is not a 503.

Results are shaped in the lane's threads too (`QueryLane.run`), so the event loop only
moves finished bytes.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from footfall.shared.errors import QueryTooCostlyError

if TYPE_CHECKING:
    from footfall.shared.warehouse.client import ClickHouseWarehouse, WarehouseError

__all__ = ["QueryLane", "QueryLimits", "too_costly"]

T = TypeVar("T")

_CODE = re.compile(r"Code: (\d+)\b")
_TIMEOUT_EXCEEDED = 159
_MEMORY_LIMIT_EXCEEDED = 241


@dataclass(frozen=True)
class QueryLimits:
    """What one query may take: `max_seconds` of execution, `max_memory_bytes` (0: the
    server's default), and the lane's `threads`."""

    max_seconds: float = 60.0
    max_memory_bytes: int = 4 * 1024**3
    # With chDB the lane's handle runs its statements one at a time anyway; a second thread only
    # parses results concurrently, which raised the imports' p99 under exports (README).
    threads: int = 1
    max_threads: int = 0  # the warehouse's threads per statement (0: its default, all cores)

    def settings(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.max_threads > 0:
            out["max_threads"] = self.max_threads
        if self.max_seconds > 0:
            out["max_execution_time"] = self.max_seconds
        if self.max_memory_bytes > 0:
            out["max_memory_usage"] = self.max_memory_bytes
        return out


def too_costly(error: WarehouseError, limits: QueryLimits) -> QueryTooCostlyError | None:
    """The client error for a statement the lane's limits stopped (None for any other failure)."""
    text = str(error)
    found = _CODE.search(text)
    code = int(found.group(1)) if found else None
    if code == _TIMEOUT_EXCEEDED:
        return QueryTooCostlyError(
            f"the query ran longer than {limits.max_seconds:g} s (FOOTFALL_QUERY_MAX_SECONDS) and was stopped;"
            " narrow from_date..to_date, the events or the breakdown"
        )
    # 241 is also the server's total memory, which is not this query's fault (a 503 then).
    if code == _MEMORY_LIMIT_EXCEEDED and "Query memory limit" in text:
        return QueryTooCostlyError(
            f"the query needed more than {limits.max_memory_bytes} bytes of memory"
            " (FOOTFALL_QUERY_MAX_MEMORY_BYTES) and was stopped; narrow from_date..to_date, the events or the breakdown"
        )
    return None


class QueryLane:
    """The warehouse as queries see it (the `Warehouse` protocol): its own client and
    threads, and the limits on every statement."""

    def __init__(self, base: ClickHouseWarehouse, limits: QueryLimits) -> None:
        self.base = base
        self.dsn = base.dsn
        self.limits = limits
        self._settings = limits.settings()
        self._pool = ThreadPoolExecutor(max_workers=max(1, limits.threads), thread_name_prefix="warehouse-query")
        self._closed = threading.Event()

    def _limited(self, call: Callable[[], T]) -> T:
        from footfall.shared.warehouse.client import WarehouseError

        try:
            return call()
        except WarehouseError as exc:
            refused = too_costly(exc, self.limits)
            if refused is not None:
                raise refused from exc
            raise

    def command(self, sql: str, parameters: dict[str, Any] | None = None) -> Any:
        return self._limited(lambda: self.base.execute_command(sql, parameters, self._settings))

    def query(self, sql: str, parameters: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
        return self.query_columns(sql, parameters)[1]

    def query_columns(
        self, sql: str, parameters: dict[str, Any] | None = None
    ) -> tuple[list[str], list[tuple[Any, ...]]]:
        return self._limited(lambda: self.base.execute_query(sql, parameters, self._settings))

    def insert(
        self, table: str, columns: Sequence[str], data: Sequence[Sequence[Any]], *, column_oriented: bool = False
    ) -> None:
        self.base.execute_insert(table, columns, data, column_oriented=column_oriented)

    def insert_native(
        self, table: str, columns: Sequence[str], blocks: Sequence[bytes], *, materialized: bool = False
    ) -> None:
        self.base.insert_native(table, columns, blocks, materialized=materialized)

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, fn, *args)

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        self._pool.shutdown(wait=True)
        self.base.close()  # the lane's own client (a chDB handle keeps the engine open)
