"""Integration fixtures: one chDB store for the whole session, emptied per test.

chDB runs one embedded server per process, bound to the first data folder it opens; a
second folder cannot be opened while the first is in use. So the session opens one
folder (or joins the one another test module already opened), applies the migrations
once, and `clean_warehouse` truncates the tables before each test that asks for it.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import clickhouse_connect
import pytest

from footfall.shared.config import Env, HotSettings
from footfall.shared.schema import apply_migrations, hot
from footfall.shared.warehouse import ClickHouseWarehouse, open_warehouse
from footfall.shared.warehouse.client import WarehouseError

T = TypeVar("T")
_ALREADY_OPEN = re.compile(r"already initialized with path '([^']+)'")


def _open_chdb(path: Path, opener: Callable[[str], T]) -> T:
    try:
        return opener(f"chdb://{path}")
    except Exception as exc:  # clickhouse-connect's ProgrammingError; the engine is per process
        found = _ALREADY_OPEN.search(str(exc))
        if found is None:
            raise
        return opener(f"chdb://{found.group(1)}")


@pytest.fixture(scope="session")
def chdb_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A plain clickhouse-connect client of the process's chDB (a session folder, or the one
    already open), for tests that work in a database of their own."""
    client = _open_chdb(tmp_path_factory.mktemp("chdb") / "data", lambda dsn: clickhouse_connect.get_client(dsn=dsn))
    yield client
    client.close()


def _hot_columns(wh: ClickHouseWarehouse) -> None:
    """With FOOTFALL_HOT_PROPERTIES set, the store gets those hot columns and the compiler reads
    them (`footfall.shared.schema.hot`): the report suites then run over hot columns."""
    if "FOOTFALL_HOT_PROPERTIES" in Env().values:
        hot.use(hot.ensure(wh, HotSettings.from_env(Env()).names))


@pytest.fixture(scope="session")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClickHouseWarehouse]:
    """The session's chDB store with every migration applied."""
    wh = _open_chdb(tmp_path_factory.mktemp("chdb") / "data", open_warehouse)
    apply_migrations(wh)
    _hot_columns(wh)
    yield wh
    wh.close()


def truncate_all(warehouse: ClickHouseWarehouse) -> None:
    """Empty every table of the current database except the migration ledger."""
    for (table,) in warehouse.query(
        "SELECT name FROM system.tables WHERE database = currentDatabase() AND NOT is_temporary "
        "AND engine LIKE '%MergeTree%' AND name != 'schema_migrations'"
    ):
        with contextlib.suppress(WarehouseError):  # a table dropped meanwhile
            warehouse.command(f"TRUNCATE TABLE IF EXISTS `{table}`")


@pytest.fixture
def clean_warehouse(warehouse: ClickHouseWarehouse) -> ClickHouseWarehouse:
    """The session store, migrated and with empty tables."""
    apply_migrations(warehouse)  # in case a test dropped tables
    _hot_columns(warehouse)
    truncate_all(warehouse)
    return warehouse
