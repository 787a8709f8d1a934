"""The `/import` fast path's Native block stores, in a real chDB store, the rows the Python path
stores for the same body: every column (low-cardinality ones sent as plain strings, converted by
the engine), in-request duplicates dropped alike. (Hot property columns are computed by the engine
from `properties`, which is byte-identical.)"""

from __future__ import annotations

import orjson
import pytest

from footfall.services.worker.enrich import Enricher
from footfall.shared.config import ImportLimits
from footfall.shared.events import fast_import
from footfall.shared.events.validate import validate_batch
from footfall.shared.schema import hot
from footfall.shared.schema.catalog import EVENTS as EVENTS_TABLE
from footfall.shared.streams import EVENTS
from footfall.shared.streams.stream import PackedRows, insert_packed
from footfall.shared.warehouse import ClickHouseWarehouse
from tests.fastpath import require_extension

pytestmark = pytest.mark.warehouse

require_extension()

NOW_MS = 1_790_000_000_000
INGESTED_MS = NOW_MS + 11


def items() -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for i in range(280):
        props: dict[str, object] = {
            "time": NOW_MS // 1000 - i * 37 if i % 2 else NOW_MS - i * 1_234_567,
            "distinct_id": f"user-{i % 17}" if i % 5 else 1000 + i % 7,
            "$insert_id": f"id-{i}",
            "$browser": ["Chrome", "Firefox", "Safari ü"][i % 3],
            "plan": ["free", "pro", None][i % 3],
            "price": i * 1.25,
            "nested": {"a": [i, str(i)], "b": {"c": i % 2 == 0}},
            "text": 'line\nbreak "quoted" \\ é \U0001f600',
            "token": "dropped",
        }
        out.append({"event": f"ev{i % 4}", "properties": props})
    # 20 later copies of earlier events (the same dedup identity, other properties): they win
    return out + [{"event": e["event"], "properties": {**e["properties"], "plan": "copy"}} for e in out[:20]]


def stored(warehouse: ClickHouseWarehouse, project_id: int) -> list[tuple[object, ...]]:
    return warehouse.query(
        "SELECT toUnixTimestamp64Milli(time), event, distinct_id, insert_id, properties, city, region, country_code, "
        "hex(dedup_hash), toUnixTimestamp64Milli(ingested_at) FROM events "
        "WHERE project_id = {p:UInt64} ORDER BY insert_id, distinct_id",
        {"p": project_id},
    )


def test_the_fast_block_stores_the_python_paths_rows(clean_warehouse: ClickHouseWarehouse) -> None:
    wh = clean_warehouse
    body = orjson.dumps(items())
    limits = ImportLimits(max_events_per_request=2000)
    rows = fast_import.FastImport(limits, geo=False).rows(body, project_id=5, now_ms=NOW_MS, ingested_at_ms=INGESTED_MS)
    assert rows is not None and rows.items == 300 and rows.rows == 280
    insert_packed(wh, EVENTS_TABLE, PackedRows([rows.block], rows.rows))
    fast = stored(wh, 5)
    wh.command("TRUNCATE TABLE events")
    events, failures = validate_batch(
        orjson.loads(body), project_id=5, strict=True, limits=limits, now_ms=NOW_MS, body_bytes=len(body)
    )
    assert not failures
    EVENTS.store(wh, Enricher(None), events, INGESTED_MS)
    assert fast == stored(wh, 5)
    assert len(fast) == 280 and sum("copy" in row[4] for row in fast) == 20


HOT_NAMES = ["$browser", "plan", "count", "nested", "tags", "text", "flag", "absent", "time", "distinct_id"]


def hot_items(tricky: object) -> list[dict[str, object]]:
    """Events whose hot values are all of the kinds the fast path writes itself; `tricky` is the
    `text` of the last one."""
    out: list[dict[str, object]] = []
    for i in range(60):
        props: dict[str, object] = {
            "time": NOW_MS - i * 1000,
            "distinct_id": f"u{i % 9}",
            "$insert_id": f"hot-{i}",
            "$browser": ["Chrome", "Mobile Safari", ""][i % 3],
            "count": [i, -(2**63), 2**64 - 1][i % 3],
            "nested": {"a": [i, "x/y", None], "b": {"c": True}} if i % 2 else [],
            "tags": ["a", 'q"uote', "back\\slash", "http://x/y?z=1&w=2"][: i % 5],
            "text": tricky if i == 59 else "<b>plain</b> ~!@#$%^&*()_+{}|:?",
            "flag": [True, False, None][i % 3],
            "price": 1.5,  # a float, not hot here
        }
        if i % 4:
            props["plan"] = ["free", "pro"][i % 2]
        out.append({"event": "hot", "properties": props})
    return out


def hot_stored(warehouse: ClickHouseWarehouse) -> list[tuple[object, ...]]:
    columns = ", ".join(hot.column_name(name) for name in HOT_NAMES)
    return warehouse.query(f"SELECT insert_id, {columns} FROM events WHERE project_id = 5 ORDER BY insert_id")


def test_hot_columns_the_fast_path_fills_hold_what_the_engine_computes(clean_warehouse: ClickHouseWarehouse) -> None:
    wh = clean_warehouse
    assert hot.ensure(wh, HOT_NAMES) == tuple(HOT_NAMES)
    try:
        pairs = tuple((name, hot.column_name(name)) for name in HOT_NAMES)
        limits = ImportLimits()
        filling = fast_import.FastImport(limits, geo=False, hot_columns=lambda: pairs)
        leaving = fast_import.FastImport(limits, geo=False)

        def store(rows: fast_import.FastRows | None) -> list[tuple[object, ...]]:
            assert rows is not None
            wh.command("TRUNCATE TABLE events")
            insert_packed(wh, EVENTS_TABLE, PackedRows([rows.block], rows.rows, rows.columns))
            return hot_stored(wh)

        body = orjson.dumps(hot_items("the end"))
        filled = filling.rows(body, project_id=5, now_ms=NOW_MS, ingested_at_ms=INGESTED_MS)
        assert filled is not None and filled.columns == EVENTS_TABLE.column_names + tuple(c for _, c in pairs)
        given = store(filled)
        computed = store(leaving.rows(body, project_id=5, now_ms=NOW_MS, ingested_at_ms=INGESTED_MS))
        assert given == computed and len(given) == 60
        assert {row[9] for row in given} == {""} and {row[8] for row in given} == {""}  # time, distinct_id: lifted
        # a value the engine writes its own way (a float, non-ASCII text): the engine fills them all
        for tricky in (2.5, "café", "line\nbreak"):
            other = orjson.dumps(hot_items(tricky))  # type: ignore[arg-type]
            rows = filling.rows(other, project_id=5, now_ms=NOW_MS, ingested_at_ms=INGESTED_MS)
            assert rows is not None and rows.columns == EVENTS_TABLE.column_names
            last = next(row for row in store(rows) if row[0] == "hot-59")
            assert last[6] not in ("", '"the end"')  # the engine's text of the tricky value
    finally:
        wh.command("KILL MUTATION WHERE database = currentDatabase() AND table = 'events' SYNC")
        for name in HOT_NAMES:
            wh.command(f"ALTER TABLE events DROP COLUMN IF EXISTS {hot.column_name(name)} SETTINGS mutations_sync = 0")
