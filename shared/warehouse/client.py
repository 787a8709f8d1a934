"""`Warehouse`: the only way Footfall code talks to ClickHouse.

The same SQL, with server-side `{name:Type}` parameters, runs on chDB (in-process, the
embedded default) and on a ClickHouse server, both through clickhouse-connect. Its
client is synchronous; async callers go through `run()`, which uses a bounded thread
pool so a slow query never blocks the event loop.

The object `open_warehouse` returns is the ingestion lane; `query_lane(limits)` gives
the queries their own client (with chDB: their own engine handle, which runs beside
ingestion's), threads and per-statement limits (`footfall.shared.warehouse.lanes`).
"""

from __future__ import annotations

import asyncio
import re
import tempfile
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, TypeVar, cast

import clickhouse_connect
from clickhouse_connect.driver.exceptions import ClickHouseError

from footfall.shared.warehouse.dsn import Dsn, parse_dsn
from footfall.shared.warehouse.lanes import QueryLane, QueryLimits

T = TypeVar("T")

_IDENTIFIER = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]*\Z")


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

    def insert_native(
        self, table: str, columns: Sequence[str], blocks: Sequence[bytes], *, materialized: bool = False
    ) -> None: ...

    async def run(self, fn: Callable[..., T], *args: Any) -> T: ...

    def close(self) -> None: ...


class ClickHouseWarehouse:
    """clickhouse-connect client for either interface, plus a thread pool for async callers."""

    def __init__(self, dsn: Dsn, *, pool_size: int = 8, backup_dir: str = "") -> None:
        self.dsn = dsn
        if dsn.embedded and backup_dir:
            # `BACKUP`/`RESTORE … File(…)` may write and read only below this folder (footfall.shared.backup).
            options = {"backups.allowed_path": backup_dir}
            self._client = clickhouse_connect.get_client(interface="chdb", path=dsn.path, chdb_options=options)
        elif dsn.embedded:
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
        self._lanes: list[QueryLane] = []

    def query_lane(self, limits: QueryLimits) -> QueryLane:
        """The queries' lane: a client of its own on the same store (closed with this one).
        A chDB handle runs one statement at a time; two handles run side by side, so an
        import never queues behind a query statement."""
        lane = QueryLane(ClickHouseWarehouse(self.dsn, pool_size=1), limits)
        self._lanes.append(lane)
        return lane

    def execute_command(self, sql: str, parameters: dict[str, Any] | None, settings: dict[str, Any] | None) -> Any:
        try:
            return self._client.command(sql, parameters=parameters, settings=settings)
        except ClickHouseError as exc:
            raise WarehouseError(str(exc)) from exc

    def execute_query(
        self, sql: str, parameters: dict[str, Any] | None, settings: dict[str, Any] | None
    ) -> tuple[list[str], list[tuple[Any, ...]]]:
        try:
            result = self._client.query(sql, parameters=parameters, settings=settings)
        except ClickHouseError as exc:
            raise WarehouseError(str(exc)) from exc
        rows = cast("list[tuple[Any, ...]]", list(result.result_rows))
        return list(result.column_names), rows

    def execute_insert(
        self,
        table: str,
        columns: Sequence[str],
        data: Sequence[Sequence[Any]],
        *,
        column_oriented: bool = False,
    ) -> None:
        try:
            self._client.insert(
                table,
                data,
                column_names=list(columns),
                column_type_names=catalog_types(table, columns),
                column_oriented=column_oriented,
            )
        except ClickHouseError as exc:
            raise WarehouseError(str(exc)) from exc

    def insert_native(
        self, table: str, columns: Sequence[str], blocks: Sequence[bytes], *, materialized: bool = False
    ) -> None:
        """Insert rows already encoded as Native blocks (`footfall.shared.warehouse.native`),
        as they are: one insert of every block, in order (none when every block is empty).
        `materialized`: `columns` include MATERIALIZED ones whose values the blocks give (the
        engine takes them instead of computing them)."""
        if not any(blocks):
            return
        try:
            if materialized and self.dsn.embedded:
                self._insert_native_file(table, columns, blocks)
                return
            settings = {"insert_allow_materialized_columns": 1} if materialized else None
            self._client.raw_insert(table, list(columns), (b for b in blocks), settings=settings, fmt="Native")
        except ClickHouseError as exc:
            raise WarehouseError(str(exc)) from exc

    def _insert_native_file(self, table: str, columns: Sequence[str], blocks: Sequence[bytes]) -> None:
        """chDB's `INSERT … FROM INFILE` (how clickhouse-connect inserts into it) ignores
        `insert_allow_materialized_columns`; `INSERT … SELECT` from the same file honours it.
        Names are the catalog's and the hot columns' (identifiers by construction)."""
        bad = [name for name in (table, *columns) if not _IDENTIFIER.match(name)]
        if bad:
            raise WarehouseError(f"not identifiers: {bad}")
        with tempfile.NamedTemporaryFile(prefix="footfall-insert-", suffix=".native") as tmp:
            for block in blocks:
                tmp.write(block)
            tmp.flush()
            names = ", ".join(f"`{name}`" for name in columns)
            path = tmp.name.replace("\\", "\\\\").replace("'", "\\'")
            self._client.command(
                f"INSERT INTO `{table}` ({names}) SETTINGS insert_allow_materialized_columns = 1 "  # noqa: S608 - identifiers checked above; the path is our own temporary file
                f"SELECT * FROM file('{path}', Native)"
            )

    def command(self, sql: str, parameters: dict[str, Any] | None = None) -> Any:
        return self.execute_command(sql, parameters, None)

    def query(self, sql: str, parameters: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
        return self.query_columns(sql, parameters)[1]

    def query_columns(
        self, sql: str, parameters: dict[str, Any] | None = None
    ) -> tuple[list[str], list[tuple[Any, ...]]]:
        return self.execute_query(sql, parameters, None)

    def insert(
        self, table: str, columns: Sequence[str], data: Sequence[Sequence[Any]], *, column_oriented: bool = False
    ) -> None:
        self.execute_insert(table, columns, data, column_oriented=column_oriented)

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, fn, *args)

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        for lane in self._lanes:
            lane.close()
        self._pool.shutdown(wait=True)
        self._client.close()


def catalog_types(table: str, columns: Sequence[str]) -> list[str] | None:
    """The columns' types as the catalog defines them (which the migrations create), so that
    an insert needs no `DESCRIBE TABLE` round trip first; None for a table or column the
    catalog does not know (clickhouse-connect then asks the server)."""
    # Imported here: the schema package (its migrations) imports this module.
    from footfall.shared.schema.catalog import TABLES

    known = TABLES.get(table)
    if known is None or not all(c in known.types for c in columns):
        return None
    return [known.types[c] for c in columns]


def open_warehouse(dsn: str, *, backup_dir: str = "") -> ClickHouseWarehouse:
    return ClickHouseWarehouse(parse_dsn(dsn), backup_dir=backup_dir)
