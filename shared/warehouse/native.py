"""Rows in ClickHouse's Native format, encoded once where they are built.

The migration's mapping workers build the events' table rows; encoded here (clickhouse-connect's
own encoder, with the catalog's column types), the bytes cross the job's process and `serve`
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
from clickhouse_connect.driver.insert import InsertContext
from clickhouse_connect.driver.query import QueryResult
from clickhouse_connect.driver.transform import NativeTransform
from clickhouse_connect.driverc.buffer import ResponseBuffer

from footfall.shared.warehouse.client import catalog_types

__all__ = ["decode", "encode"]


def encode(table: str, columns: Sequence[str], data: Sequence[Sequence[Any]]) -> bytes:
    """Column-oriented `data` of `table`'s `columns` (as the catalog types them) as Native blocks."""
    types = catalog_types(table, columns)
    if types is None:
        raise ValueError(f"the catalog does not type every column of {table}: {list(columns)}")
    context = InsertContext(table, list(columns), [get_from_name(t) for t in types], data, column_oriented=True)
    encoded = b"".join(NativeTransform.build_insert(context))
    # The encoder starts its first chunk with the HTTP insert statement; the blocks follow it.
    return encoded[encoded.index(b"\n") + 1 :] if encoded.startswith(b"INSERT ") else encoded


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
