"""Hot columns chosen by use (`footfall.shared.schema.hot_auto`, FOOTFALL_HOT_AUTO) on a real
store: the most read event properties get their columns, marked so that a process starting
later reads them too; the budget holds; the answers do not change.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import REGISTRY

from footfall.shared.config import HotSettings
from footfall.shared.expr import check_expr, compile_where, parse_expr
from footfall.shared.schema import hot
from footfall.shared.schema.hot_auto import AutoHot, promote, start_hot_columns
from footfall.shared.sql import Params, render
from footfall.shared.warehouse import ClickHouseWarehouse

pytestmark = pytest.mark.warehouse

COLUMNS = ["project_id", "time", "event", "distinct_id", "insert_id", "properties", "dedup_hash", "ingested_at"]
NAMES = ["auto-test plan", "auto-test price"]
PLANS = ["pro", "free", None, "pro", 3, "pro"]


def _drop(warehouse: ClickHouseWarehouse) -> None:
    warehouse.command("KILL MUTATION WHERE database = currentDatabase() AND table = 'events' SYNC")
    for name in NAMES:
        column = hot.column_name(name)
        warehouse.command(f"ALTER TABLE events DROP COLUMN IF EXISTS {column} SETTINGS mutations_sync = 0")


def _count_pro(warehouse: ClickHouseWarehouse) -> tuple[int, str]:
    """How many events have plan "pro", through the compiler; and the SQL it ran."""
    params = Params()
    where = compile_where(check_expr(parse_expr(f'properties["{NAMES[0]}"] == "pro"')), params)
    text = f"SELECT count() FROM events WHERE project_id = 1 AND {render(where)}"
    ((count,),) = warehouse.query(text, params.values)
    return int(count), text


def _read(name: str, times: int) -> None:
    for _ in range(times):
        compile_where(check_expr(parse_expr(f'defined(properties["{name}"])')), Params())


@pytest.fixture
def store(clean_warehouse: ClickHouseWarehouse) -> ClickHouseWarehouse:
    t0 = datetime(2024, 5, 1, tzinfo=UTC)
    rows = []
    for i, plan in enumerate(PLANS * 5):
        props = {"n": i} if plan is None else {NAMES[0]: plan, NAMES[1]: i}
        rows.append([1, t0 + timedelta(minutes=i), "e", f"u{i}", f"i{i}", json.dumps(props), bytes([i]) * 16, t0])
    clean_warehouse.insert("events", COLUMNS, rows)
    _drop(clean_warehouse)
    with hot.using(()):
        hot.take_reads()
        yield clean_warehouse
        hot.take_reads()
    _drop(clean_warehouse)


def test_most_read_properties_become_hot_within_the_budget_and_answers_stay(store: ClickHouseWarehouse) -> None:
    wh = store
    before, text = _count_pro(wh)
    assert before == 15 and "properties" in text  # read from the JSON text
    _read(NAMES[0], 3)
    _read(NAMES[1], 2)
    reads = hot.take_reads()
    assert reads[NAMES[0]] > reads[NAMES[1]] >= 2

    # Budget 1: the most read property only.
    settings = HotSettings(names=(), auto=1, auto_reads=2)
    promote(wh, (), settings, reads)
    assert hot.in_use() == (NAMES[0],)
    assert hot.auto_names(wh) == (NAMES[0],)
    after, text = _count_pro(wh)
    assert after == before and hot.column_name(NAMES[0]) in text and "properties" not in text

    # The budget is used up: more reads of the other property add nothing.
    promote(wh, (), settings, {NAMES[1]: 100})
    assert hot.in_use() == (NAMES[0],)
    # A larger budget: the other property too, after the first; below the threshold nothing.
    promote(wh, (), HotSettings(names=(), auto=2, auto_reads=101), {NAMES[1]: 100})
    assert hot.in_use() == (NAMES[0],)
    added = REGISTRY.get_sample_value("footfall_hot_columns_auto_added_total") or 0.0
    promote(wh, ("$browser",), HotSettings(names=("$browser",), auto=2, auto_reads=2), {NAMES[1]: 100})
    assert hot.in_use() == ("$browser", NAMES[0], NAMES[1])
    assert _count_pro(wh)[0] == before
    assert REGISTRY.get_sample_value("footfall_hot_columns_auto_added_total") == added + 1
    assert REGISTRY.get_sample_value("footfall_hot_columns", {"source": "auto"}) == 2
    assert REGISTRY.get_sample_value("footfall_hot_columns", {"source": "configured"}) == 1


def test_a_starting_process_reads_the_columns_made_hot_before(store: ClickHouseWarehouse) -> None:
    wh = store
    promote(wh, (), HotSettings(names=(), auto=1, auto_reads=1), {NAMES[0]: 1})
    hot.use(())  # a new process: nothing in use yet
    auto = start_hot_columns(wh, HotSettings(names=(), auto=1))
    assert isinstance(auto, AutoHot)
    assert hot.in_use() == (NAMES[0],)
    assert _count_pro(wh)[0] == 15
    # With FOOTFALL_HOT_AUTO=0 the automatic columns are not read (the configured ones are).
    assert start_hot_columns(wh, HotSettings(names=(), auto=0)) is None
    assert hot.in_use() == ()
    assert _count_pro(wh)[0] == 15


def test_a_round_that_fails_is_logged_and_the_next_one_runs(store: ClickHouseWarehouse) -> None:
    class Refusing:
        async def run(self, fn: object, *args: object) -> None:
            raise OSError("the store is away")

    auto = AutoHot(Refusing(), (), HotSettings(names=(), auto=1, auto_reads=1))  # type: ignore[arg-type]
    _read(NAMES[0], 1)
    asyncio.run(auto.round())  # logged, not raised
    assert hot.in_use() == ()
    working = AutoHot(store, (), HotSettings(names=(), auto=1, auto_reads=1))
    _read(NAMES[0], 1)
    asyncio.run(working.round())
    assert hot.in_use() == (NAMES[0],)
