"""Insert a processed batch into the events table (one insert, with metrics)."""

from __future__ import annotations

import time

from footfall.services.worker.process import EVENT_COLUMNS, Batch
from footfall.shared import metrics
from footfall.shared.warehouse import Warehouse


def insert_batch(warehouse: Warehouse, batch: Batch) -> None:
    if not len(batch):
        return
    started = time.perf_counter()
    warehouse.insert("events", EVENT_COLUMNS, batch.columns, column_oriented=True)
    metrics.INSERT_SECONDS.observe(time.perf_counter() - started)
    metrics.INSERT_BATCH_EVENTS.observe(len(batch))
