"""Rows encoded as Native blocks (`footfall.shared.warehouse.native`) insert as the same rows as
the client's own insert of the same columns, and read back as what was encoded."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC

import pytest

from footfall.shared.schema.catalog import EVENTS
from footfall.shared.warehouse import ClickHouseWarehouse, WarehouseError, native
from tests.oracle._common import to_ms

T0 = 1_790_000_000_000


def columns(rows: int, offset: int = 0) -> list[list[object]]:
    """Events columns of `rows` rows with every column type of the table (strings with quotes,
    newlines and non-ASCII, empty low-cardinality values, raw 16-byte keys)."""
    values: dict[str, list[object]] = {
        "project_id": [7 + (i % 2) for i in range(rows)],
        "time": [T0 + 1_000 * i for i in range(rows)],
        "event": [f"ev{i % 3}" for i in range(rows)],
        "distinct_id": [f'user "{i}"\n ü' for i in range(rows)],
        "insert_id": [f"id-{offset + i}" for i in range(rows)],
        "properties": [f'{{"n": {i}, "s": "ä\\u0000"}}' for i in range(rows)],
        "city": ["Berlin" if i % 2 else "" for i in range(rows)],
        "region": ["" for _ in range(rows)],
        "country_code": ["DE" if i % 3 else "" for i in range(rows)],
        "dedup_hash": [bytes([i % 256]) * 16 for i in range(rows)],
        "ingested_at": [T0 + 5 for _ in range(rows)],
    }
    return [values[name] for name in EVENTS.column_names]


def stored(warehouse: ClickHouseWarehouse, project_id: int) -> list[tuple[object, ...]]:
    return warehouse.query(
        "SELECT toUnixTimestamp64Milli(time), event, distinct_id, insert_id, properties, city, region, country_code, "
        "hex(dedup_hash), toUnixTimestamp64Milli(ingested_at) FROM events WHERE project_id = {p:UInt64} "
        "ORDER BY insert_id",
        {"p": project_id},
    )


def test_native_blocks_insert_the_rows_the_client_insert_does(clean_warehouse: ClickHouseWarehouse) -> None:
    wh = clean_warehouse
    blocks = [
        native.encode("events", EVENTS.column_names, columns(50)),
        native.encode("events", EVENTS.column_names, columns(30, 50)),
    ]
    wh.insert_native("events", EVENTS.column_names, blocks)
    natively = {p: stored(wh, p) for p in (7, 8)}
    wh.command("TRUNCATE TABLE events")
    wh.insert("events", EVENTS.column_names, columns(50), column_oriented=True)
    wh.insert("events", EVENTS.column_names, columns(30, 50), column_oriented=True)
    assert natively == {p: stored(wh, p) for p in (7, 8)}
    assert len(natively[7]) + len(natively[8]) == 80


def test_empty_blocks_are_nothing_in_a_stream(clean_warehouse: ClickHouseWarehouse) -> None:
    """A batch whose every line was invalid builds no rows: its block is empty bytes, and a
    stream with it inserts the other blocks' rows (an empty Native block would end the stream)."""
    empty = native.encode("events", EVENTS.column_names, [[] for _ in EVENTS.column_names])
    assert empty == b""
    blocks = [
        native.encode("events", EVENTS.column_names, columns(3)),
        empty,
        native.encode("events", EVENTS.column_names, columns(2, 3)),
    ]
    clean_warehouse.insert_native("events", EVENTS.column_names, blocks)
    clean_warehouse.insert_native("events", EVENTS.column_names, [empty, empty])  # nothing to insert
    ids = sorted(str(r[3]) for p in (7, 8) for r in stored(clean_warehouse, p))
    assert ids == [f"id-{i}" for i in range(5)]


def test_native_blocks_read_back_as_encoded() -> None:
    data = columns(20)
    got = native.decode(native.encode("events", EVENTS.column_names, data) * 2)  # two blocks, one stream
    assert list(got) == list(EVENTS.column_names)
    for name, want in zip(EVENTS.column_names, data, strict=True):
        values = got[name]
        if name in ("time", "ingested_at"):
            values = [to_ms(v.replace(tzinfo=UTC)) for v in values]
        assert values == want * 2, name


def test_encoding_refuses_what_the_catalog_does_not_type_or_ragged_columns() -> None:
    with pytest.raises(ValueError, match="catalog"):
        native.encode("events", ["project_id", "no_such_column"], [[1], [2]])
    with pytest.raises(ValueError, match="same length"):
        native.encode("events", EVENTS.column_names, [c[:1] if i == 3 else c for i, c in enumerate(columns(2))])


def test_a_block_the_table_cannot_take_is_a_warehouse_error(clean_warehouse: ClickHouseWarehouse) -> None:
    block = native.encode("events", EVENTS.column_names, columns(3))
    with pytest.raises(WarehouseError):
        clean_warehouse.insert_native("events", EVENTS.column_names, [block[: len(block) // 2]])  # cut short
    assert stored(clean_warehouse, 7) == []


def test_encoding_does_not_load_pandas() -> None:
    """A mapping worker that encodes rows stays small: pandas (and pyarrow with it) never loads."""
    code = (
        "import sys\n"
        "from footfall.shared.warehouse import native\n"
        "from tests.integration.test_native_blocks import columns\n"
        "from footfall.shared.schema.catalog import EVENTS\n"
        "native.encode('events', EVENTS.column_names, columns(5))\n"
        "print(sorted(m for m in ('pandas', 'pyarrow') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"
