"""`EmbeddedSink`: the worker's store step run inline, so a request is answered after the insert.

Group commit (issue 17): for the streams named in `grouped` (the events stream in `serve`),
the batches that requests publish while an insert is running are coalesced into the next
insert, which all of them await. There is no timer: a request that finds no insert running
starts one at once, so a lone request waits no longer than before, and under load each
insert takes everything that queued while the previous one ran (up to `max_group_items`).
One insert per group means one new part per group instead of one per request, and the
engine's fixed cost per insert is shared. A failed insert fails every request of its group
with the same retryable 503: nothing of a group is acknowledged unless all of it is stored.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, TypeVar

import structlog

from footfall.services.worker.store import store_batch
from footfall.shared.errors import UnavailableError
from footfall.shared.streams import Locator, Stream
from footfall.shared.streams.stream import PackedRows, insert_packed
from footfall.shared.warehouse import Warehouse, WarehouseError

log = structlog.get_logger(__name__)

T = TypeVar("T")

MAX_GROUP_ITEMS = 50_000  # one insert takes at most this many items (more only for one big batch)


@dataclass
class _Waiter:
    items: list[Any]
    done: asyncio.Future[dict[int, str]]


@dataclass
class _Group:
    """The queue of one grouped stream: requests waiting for the next insert."""

    waiting: list[_Waiter] = field(default_factory=list)
    task: asyncio.Task[None] | None = None


class EmbeddedSink:
    """Duplicates across requests and restarts are removed by the ReplacingMergeTree and by
    queries that count distinct dedup hashes; inside one insert (one request, or one group of
    requests) they are dropped here, the later copy winning."""

    def __init__(
        self,
        warehouse: Warehouse,
        locator: Locator,
        *,
        grouped: Collection[str] = (),
        max_group_items: int = MAX_GROUP_ITEMS,
    ) -> None:
        self.warehouse = warehouse
        self.locator = locator
        self.grouped = frozenset(grouped)
        self.max_group_items = max_group_items
        self._groups: dict[str, _Group] = {}

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        """Waits for the inserts under way (their requests are answered)."""
        tasks = [g.task for g in self._groups.values() if g.task is not None]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def publish(self, stream: Stream[T], items: list[T]) -> dict[int, str]:
        if not items:
            return {}
        if stream.name not in self.grouped:
            return await self._store(stream, items)
        group = self._groups.setdefault(stream.name, _Group())
        waiter = _Waiter(items, asyncio.get_running_loop().create_future())
        waiter.done.add_done_callback(_retrieve)  # a client that left is not told; nothing is logged
        group.waiting.append(waiter)
        if group.task is None:
            group.task = asyncio.create_task(self._commit(stream, group))
        # The insert goes on if this request is cancelled (its client left): others share it.
        return await asyncio.shield(waiter.done)

    async def publish_rows(self, stream: Stream[Any], packed: PackedRows) -> None:
        """Rows of `stream` built elsewhere by the stream's own builder (the migration's mapping
        workers run `build_event_rows`), packed: opened and inserted at once, returning once stored."""
        try:
            await self.warehouse.run(insert_packed, self.warehouse, stream.table, packed)
        except WarehouseError as exc:
            log.error("embedded_insert_failed", stream=stream.name, error=str(exc)[:2000])
            raise UnavailableError("storage unavailable, retry with backoff") from exc

    async def _store(self, stream: Stream[T], items: list[T]) -> dict[int, str]:
        try:
            stored = await self.warehouse.run(store_batch, stream, self.warehouse, self.locator, items)
        except WarehouseError as exc:
            log.error("embedded_insert_failed", stream=stream.name, error=str(exc)[:2000])
            raise UnavailableError("storage unavailable, retry with backoff") from exc
        return stored.refused

    async def _commit(self, stream: Stream[Any], group: _Group) -> None:
        """Insert what waits, group after group, until nothing does."""
        try:
            while group.waiting:
                taken, count = 0, 0
                while taken < len(group.waiting) and (
                    taken == 0 or count + len(group.waiting[taken].items) <= self.max_group_items
                ):
                    count += len(group.waiting[taken].items)
                    taken += 1
                batch, group.waiting = group.waiting[:taken], group.waiting[taken:]
                items = [item for waiter in batch for item in waiter.items]
                try:
                    refused = await self._store(stream, items)
                except BaseException as exc:  # every request of the group fails alike
                    for waiter in batch:
                        if not waiter.done.done():
                            waiter.done.set_exception(_copy(exc))
                    if not isinstance(exc, Exception):
                        raise
                    continue
                offset = 0
                for waiter in batch:
                    end = offset + len(waiter.items)
                    mine = {i - offset: reason for i, reason in refused.items() if offset <= i < end}
                    if not waiter.done.done():
                        waiter.done.set_result(mine)
                    offset = end
        finally:
            group.task = None
            for waiter in group.waiting:  # only when cancelled at shutdown
                if not waiter.done.done():
                    waiter.done.set_exception(UnavailableError("storage unavailable, retry with backoff"))
            group.waiting = []


def _retrieve(done: asyncio.Future[dict[int, str]]) -> None:
    if not done.cancelled():
        done.exception()


def _copy(exc: BaseException) -> BaseException:
    """One exception object per waiter (each one's traceback is its own)."""
    if isinstance(exc, UnavailableError):
        return UnavailableError(exc.message, retry_after=exc.retry_after or 2)
    if isinstance(exc, asyncio.CancelledError):
        return UnavailableError("storage unavailable, retry with backoff")
    return exc
