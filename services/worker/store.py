"""Store one batch of a stream: drop in-batch duplicates, build the rows, insert them.

The one function both ingestion shapes call: the Kafka worker (`pipeline.py`) and the
embedded path (`footfall.services.standalone.sink`). Synchronous and blocking: callers run
it in the warehouse's thread pool.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from footfall.shared import metrics
from footfall.shared.streams import Locator, Stream
from footfall.shared.warehouse import Warehouse

__all__ = ["Stored", "store_batch"]

T = TypeVar("T")


@dataclass(frozen=True)
class Stored:
    keys: list[bytes]  # dedup keys of the inserted rows, in row order
    dropped: int  # in-batch duplicates that were not inserted


def store_batch(
    stream: Stream[T], warehouse: Warehouse, locator: Locator, items: Sequence[T], ingested_at_ms: int | None = None
) -> Stored:
    """Insert `items` as one statement. Of several items with the same dedup key only the
    last is kept: the interface says the most recently ingested copy of a duplicate wins,
    and inside one batch that is the later one."""
    latest: dict[bytes, T] = {}
    key_of = stream.dedup_key
    for item in items:
        latest[key_of(item)] = item  # re-assigning keeps the first position, last value
    if not latest:
        return Stored([], 0)
    now_ms = ingested_at_ms if ingested_at_ms is not None else int(time.time() * 1000)
    rows = stream.rows(list(latest.values()), list(latest), locator, now_ms)
    started = time.perf_counter()
    warehouse.insert(stream.table.name, stream.table.column_names, rows.columns, column_oriented=True)
    metrics.INSERT_SECONDS.observe(time.perf_counter() - started)
    metrics.INSERT_BATCH_EVENTS.observe(len(rows))
    dropped = len(items) - len(latest)
    if dropped:
        metrics.DUPLICATES_DROPPED.labels("batch").inc(dropped)
    return Stored(rows.keys, dropped)
