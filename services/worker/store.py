"""Store one batch of a stream: the one function both ingestion shapes call, the Kafka worker
(`pipeline.py`) and the embedded path (`footfall.services.standalone.sink`). Blocking:
callers run it in the warehouse's thread pool. What storing means is the stream's own
`store` step (rows into a table for events; log and apply for profile updates)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TypeVar

from footfall.shared import metrics
from footfall.shared.streams import Locator, Stored, Stream
from footfall.shared.warehouse import Warehouse

__all__ = ["Stored", "store_batch"]

T = TypeVar("T")


def store_batch(
    stream: Stream[T], warehouse: Warehouse, locator: Locator, items: Sequence[T], ingested_at_ms: int | None = None
) -> Stored:
    now_ms = ingested_at_ms if ingested_at_ms is not None else int(time.time() * 1000)
    stored = stream.store(warehouse, locator, items, now_ms)
    if stored.dropped:
        metrics.DUPLICATES_DROPPED.labels("batch").inc(stored.dropped)
    return stored
