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
