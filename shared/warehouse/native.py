"""Rows in ClickHouse's Native format, encoded once where they are built.

The migration's mapping workers build the events' table rows; encoded here (clickhouse-connect's
column writers, with the catalog's column types), the bytes cross the job's process and `serve`
unopened and the store inserts them as they are (`ClickHouseWarehouse.insert_native`), so the
store's process neither unpacks them nor serialises them a second time. Measured on the
migration bench's events, 20,000 rows per insert, in one process: 15.5–19.9 µs of CPU per
event to unpack marshalled columns and insert them, 11.3–14.7 to insert the same rows as
Native blocks; encoding costs the worker ≈ 0.8 µs per event more than `marshal`.

Several encoded blocks of one table's columns, concatenated, are one Native stream.
`decode` reads them back (tests, and any process that must look inside).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, cast

from clickhouse_connect.datatypes.registry import get_from_name
from clickhouse_connect.driver.common import write_leb128
from clickhouse_connect.driver.insert import InsertContext
from clickhouse_connect.driver.query import QueryResult
from clickhouse_connect.driver.transform import NativeTransform

try:
    from clickhouse_connect.driverc.buffer import ResponseBuffer
except ImportError:  # a platform without clickhouse-connect's C extensions
    from clickhouse_connect.driver.buffer import ResponseBuffer

from footfall.shared.warehouse.client import catalog_types

__all__ = ["decode", "encode"]


def encode(table: str, columns: Sequence[str], data: Sequence[Sequence[Any]]) -> bytes:
    """Column-oriented `data` of `table`'s `columns` (as the catalog types them) as one Native
    block: the column and row counts, then each column's name, type and values."""
    types = catalog_types(table, columns)
    if types is None:
        raise ValueError(f"the catalog does not type every column of {table}: {list(columns)}")
    rows = len(data[0]) if data else 0
    if any(len(values) != rows for values in data) or len(data) != len(columns):
        raise ValueError("one list of values per column, all of the same length")
    if not rows:
        return b""  # no block at all: the engine refuses an empty one inside a stream
    # The context is built without its data: given data, clickhouse-connect first checks whether
    # it is a pandas frame, which imports pandas and pyarrow (≈ 80 MB in every mapping worker).
    context = InsertContext(table, list(columns), [], None, column_oriented=True)
    out = bytearray()
    write_leb128(len(columns), out)
    write_leb128(rows, out)
    for name, type_name, values in zip(columns, types, data, strict=True):
        column_type = get_from_name(type_name)
        for text in (name, column_type.insert_name):  # the names clickhouse-connect's own insert writes
            encoded = text.encode()
            write_leb128(len(encoded), out)
            out += encoded
        context.start_column(name)
        column_type.write_column(values, out, context)
    return bytes(out)


class _Chunks:
    """The byte source clickhouse-connect's reader takes: an iterator of chunks and `close`."""

    def __init__(self, data: bytes) -> None:
        self.gen: Iterator[bytes] = iter([data])

    def close(self) -> None:
        return None


def decode(data: bytes) -> dict[str, list[Any]]:
    """Native blocks → each column's values, by name (DateTime64 values as naive UTC datetimes)."""
    if not data:
        return {}
    result = cast("QueryResult", NativeTransform.parse_response(ResponseBuffer(_Chunks(data))))  # no numpy asked
    return {name: list(values) for name, values in zip(result.column_names, result.result_columns, strict=True)}
