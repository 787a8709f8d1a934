"""`EmbeddedSink`: the worker's processing run inline, so `/import` answers after the insert."""

from __future__ import annotations

import time

import structlog

from footfall.shared.errors import UnavailableError
from footfall.services.worker.enrich import Enricher
from footfall.services.worker.process import build_batch
from footfall.services.worker.write import insert_batch
from footfall.shared import metrics
from footfall.shared.events import Event
from footfall.shared.warehouse import Warehouse, WarehouseError

log = structlog.get_logger(__name__)


class EmbeddedSink:
    """Duplicates across requests and restarts are removed by the ReplacingMergeTree and by
    queries that count distinct dedup hashes; inside one request they are dropped here."""

    def __init__(self, warehouse: Warehouse, enricher: Enricher) -> None:
        self.warehouse = warehouse
        self.enricher = enricher

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    def _store(self, events: list[Event]) -> None:
        batch, dropped = build_batch(events, self.enricher, int(time.time() * 1000))
        if dropped:
            metrics.DUPLICATES_DROPPED.labels("batch").inc(dropped)
        insert_batch(self.warehouse, batch)

    async def publish(self, events: list[Event]) -> None:
        if not events:
            return
        try:
            await self.warehouse.run(self._store, events)
        except WarehouseError as exc:
            log.error("embedded_insert_failed", error=str(exc)[:2000])
            raise UnavailableError("storage unavailable, retry with backoff") from exc
