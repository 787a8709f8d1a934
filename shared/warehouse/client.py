"""`Warehouse`: the only way Footfall code talks to ClickHouse.

The same SQL, with server-side `{name:Type}` parameters, runs on chDB (in-process, the
embedded default) and on a ClickHouse server, both through clickhouse-connect. Its
client is synchronous; async callers go through `run()`, which uses a bounded thread
pool so a slow query never blocks the event loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, TypeVar, cast

import clickhouse_connect
from clickhouse_connect.driver.exceptions import ClickHouseError

from footfall.shared.warehouse.dsn import Dsn, parse_dsn

T = TypeVar("T")


class WarehouseError(RuntimeError):
    """The warehouse refused or could not run a statement."""


class Warehouse(Protocol):
    def command(self, sql: str, parameters: dict[str, Any] | None = None) -> Any: ...

    def query(self, sql: str, parameters: dict[str, Any] | None = None) -> list[tuple[Any, ...]]: ...

    def query_columns(
        self, sql: str, parameters: dict[str, Any] | None = None
    ) -> tuple[list[str], list[tuple[Any, ...]]]: ...

    def insert(
        self, table: str, columns: Sequence[str], data: Sequence[Sequence[Any]], *, column_oriented: bool = False
    ) -> None: ...

    async def run(self, fn: Callable[..., T], *args: Any) -> T: ...

    def close(self) -> None: ...


class ClickHouseWarehouse:
    """clickhouse-connect client for either interface, plus a thread pool for async callers."""

    def __init__(self, dsn: Dsn, *, pool_size: int = 8) -> None:
        self.dsn = dsn
        if dsn.embedded:
            self._client = clickhouse_connect.get_client(dsn=f"chdb://{dsn.path}")
        else:
            self._client = clickhouse_connect.get_client(
                host=dsn.host,
                port=dsn.port,
                username=dsn.username,
                password=dsn.password,
                database=dsn.database,
                secure=dsn.scheme == "https",
                # One shared HTTP client across threads: each call carries its own settings.
                autogenerate_session_id=False,
            )
        self._pool = ThreadPoolExecutor(max_workers=pool_size, thread_name_prefix="warehouse")
        self._closed = threading.Event()

    def command(self, sql: str, parameters: dict[str, Any] | None = None) -> Any:
        try:
            return self._client.command(sql, parameters=parameters)
        except ClickHouseError as exc:
            raise WarehouseError(str(exc)) from exc

    def query(self, sql: str, parameters: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
        return self.query_columns(sql, parameters)[1]

    def query_columns(
        self, sql: str, parameters: dict[str, Any] | None = None
    ) -> tuple[list[str], list[tuple[Any, ...]]]:
        try:
            result = self._client.query(sql, parameters=parameters)
        except ClickHouseError as exc:
            raise WarehouseError(str(exc)) from exc
        rows = cast("list[tuple[Any, ...]]", list(result.result_rows))
        return list(result.column_names), rows

    def insert(
        self, table: str, columns: Sequence[str], data: Sequence[Sequence[Any]], *, column_oriented: bool = False
    ) -> None:
        try:
            self._client.insert(table, data, column_names=list(columns), column_oriented=column_oriented)
        except ClickHouseError as exc:
            raise WarehouseError(str(exc)) from exc

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, fn, *args)

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        self._pool.shutdown(wait=True)
        self._client.close()


def open_warehouse(dsn: str) -> ClickHouseWarehouse:
    return ClickHouseWarehouse(parse_dsn(dsn))
