"""`EmbeddedSink`: the worker's store step run inline, so a request is answered after the insert."""

from __future__ import annotations

from typing import TypeVar

import structlog

from footfall.services.worker.store import store_batch
from footfall.shared.errors import UnavailableError
from footfall.shared.streams import Locator, Stream
from footfall.shared.warehouse import Warehouse, WarehouseError

log = structlog.get_logger(__name__)

T = TypeVar("T")


class EmbeddedSink:
    """Duplicates across requests and restarts are removed by the ReplacingMergeTree and by
    queries that count distinct dedup hashes; inside one request they are dropped here."""

    def __init__(self, warehouse: Warehouse, locator: Locator) -> None:
        self.warehouse = warehouse
        self.locator = locator

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def publish(self, stream: Stream[T], items: list[T]) -> dict[int, str]:
        if not items:
            return {}
        try:
            stored = await self.warehouse.run(store_batch, stream, self.warehouse, self.locator, items)
        except WarehouseError as exc:
            log.error("embedded_insert_failed", stream=stream.name, error=str(exc)[:2000])
            raise UnavailableError("storage unavailable, retry with backoff") from exc
        return stored.refused
