"""`Stream`: one kind of ingested item, described once.

A stream names everything the three ingestion paths need about its items, so that the
gateway's sinks, the Kafka worker and the embedded path take a stream and hold no
knowledge of their own about events (or, later, profile and group updates):

* `validate`: decoded JSON items of one request → items and `Failure`s (the one validator);
* `encode` / `decode`: one item ↔ one Kafka record value (decoding is strict: a record may
  come from any producer; anything else is a `CodecError` and goes to the dead letters);
* `partition_key`: the Kafka key, which keeps one user's (or profile's) items in order on
  one partition and every retry on the partition that saw the original;
* `dedup_key`: 16 bytes naming what a duplicate is (Redis keys, in-batch dedup, the table);
* `store`: how a batch of items is stored (blocking; run in the warehouse's thread pool) —
  for most streams `insert_rows(table, rows, dedup_key)`: drop in-batch duplicates (the
  last copy wins), build column-oriented rows of the catalog `table` (pure; the `Locator`
  turns an address into a place), insert them; the profile streams log and apply updates;
* `table`: where the items go (a catalog table).

The topic of a stream is `<prefix><name>.raw` (`footfall.shared.kafka.Topics.of`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from footfall.shared import metrics
from footfall.shared.config import ImportLimits
from footfall.shared.ingest import Locator, Place, Stored
from footfall.shared.schema.catalog import Table
from footfall.shared.warehouse import Warehouse, native

__all__ = [
    "CodecError",
    "Intake",
    "Locator",
    "PackedRows",
    "Place",
    "Rows",
    "Stored",
    "Stream",
    "dedup_rows",
    "insert_built",
    "insert_packed",
    "insert_rows",
]

T = TypeVar("T")


class CodecError(ValueError):
    """A record that is not a valid envelope of its stream; `reason` is a short metrics label."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Intake:
    """What a stream's validator needs besides the items of a request.

    `project_id` is the project the request's credentials named (0: none did, so each item
    must name its own with a token, which `project_of_token` resolves — None for an unknown
    token)."""

    project_id: int
    strict: bool
    limits: ImportLimits
    now_ms: int
    body_bytes: int
    project_of_token: Callable[[str], int | None] | None = None


@dataclass(frozen=True)
class Rows:
    """Column-oriented rows of a stream's table, with each row's dedup key."""

    columns: list[list[Any]]
    keys: list[bytes]

    def __len__(self) -> int:
        return len(self.keys)


@dataclass
class PackedRows:
    """A table's rows as Native blocks (`pack`, one blob per batch built), in order: what
    crosses process boundaries unopened (the migration's mapping workers build rows that the
    job's process gathers and forwards) and the store inserts as it is
    (`footfall.shared.warehouse.native`)."""

    blobs: list[bytes]
    rows: int  # in all the blobs
    # The blobs' columns when they hold more than the table's catalog columns (the values of the
    # hot property columns, which the fast path writes); None: the table's.
    columns: tuple[str, ...] | None = None

    @staticmethod
    def pack(table: Table, built: Rows) -> bytes:
        return native.encode(table.name, table.column_names, built.columns)

    def unpack(self) -> dict[str, list[Any]]:
        """Every blob's rows, column by column (for a look inside: the store never opens them)."""
        return native.decode(b"".join(self.blobs))


StoreFn = Callable[[Warehouse, Locator, Sequence[T], int], Stored]


def dedup_rows(
    rows: Callable[[Sequence[T], Sequence[bytes], Locator, int], Rows], dedup_key: Callable[[T], bytes]
) -> Callable[[Sequence[T], Locator, int], tuple[Rows, int]]:
    """The pure half of `insert_rows`' store step: of several items with the same dedup key
    only the last is kept (the most recently ingested copy of a duplicate wins, and inside one
    batch that is the later one), then the rows are built; returns them and how many items
    were dropped. Any process may run it (the migration's workers do)."""

    def build(items: Sequence[T], locator: Locator, ingested_at_ms: int) -> tuple[Rows, int]:
        latest: dict[bytes, T] = {}
        for item in items:
            latest[dedup_key(item)] = item  # re-assigning keeps the first position, last value
        return rows(list(latest.values()), list(latest), locator, ingested_at_ms), len(items) - len(latest)

    return build


def _timed_insert(insert: Callable[[], None], rows: int) -> None:
    started = time.perf_counter()
    insert()
    metrics.INSERT_SECONDS.observe(time.perf_counter() - started)
    metrics.INSERT_BATCH_EVENTS.observe(rows)


def insert_built(warehouse: Warehouse, table: Table, built: Rows) -> None:
    """The other half: one insert of built rows."""
    _timed_insert(
        lambda: warehouse.insert(table.name, table.column_names, built.columns, column_oriented=True), len(built)
    )


def insert_packed(warehouse: Warehouse, table: Table, packed: PackedRows) -> None:
    """One insert of packed rows, as they are (blocking: in the warehouse's thread), with the
    blocks' own columns (`PackedRows.columns`: MATERIALIZED ones too when the `/import` fast path
    computed the hot property columns)."""
    names = table.column_names if packed.columns is None else tuple(packed.columns)
    materialized = tuple(names) != tuple(table.column_names)
    _timed_insert(
        lambda: warehouse.insert_native(table.name, names, packed.blobs, materialized=materialized), packed.rows
    )


def insert_rows(
    table: Table, rows: Callable[[Sequence[T], Sequence[bytes], Locator, int], Rows], dedup_key: Callable[[T], bytes]
) -> StoreFn[T]:
    """The store step of a stream whose items are rows of `table`: `dedup_rows`, then one insert."""
    build = dedup_rows(rows, dedup_key)

    def store(warehouse: Warehouse, locator: Locator, items: Sequence[T], ingested_at_ms: int) -> Stored:
        built, dropped = build(items, locator, ingested_at_ms)
        if not len(built):
            return Stored()
        insert_built(warehouse, table, built)
        return Stored(built.keys, dropped)

    return store


@dataclass(frozen=True)
class Stream(Generic[T]):
    name: str
    table: Table
    validate: Callable[[list[Any], Intake], tuple[list[T], list[Any]]]  # items, failures (with `as_record()`)
    encode: Callable[[T], bytes]
    decode: Callable[[bytes | None], T]
    partition_key: Callable[[T], bytes]
    dedup_key: Callable[[T], bytes]
    store: StoreFn[T]

    def __repr__(self) -> str:
        return f"Stream({self.name!r})"
