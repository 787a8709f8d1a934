"""`EmbeddedSink`: the worker's store step run inline, so a request is answered after the insert.

Group commit (issue 17): for the streams named in `grouped` (the events stream in `serve`),
the batches that requests publish while an insert is running are coalesced into the next
insert, which all of them await. There is no timer: a request that finds no insert running
starts one at once, so a lone request waits no longer than before, and under load each
insert takes everything that queued while the previous one ran (up to `max_group_items`).
One insert per group means one new part per group instead of one per request, and the
engine's fixed cost per insert is shared. A failed insert fails every request of its group
with the same retryable 503: nothing of a group is acknowledged unless all of it is stored.

The `/import` fast path's requests (`publish_fast`: rows already built, as Native blocks) are
grouped alike, their blocks inserted together; a run of such requests and a run of requests
with events are separate inserts. Inside a group of blocks no dedup key repeats: a request
holding a duplicate of an earlier one of the group starts the next group, so the later copy
is the later insert and wins, as in one group of events.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, TypeVar

import structlog

from footfall.services.worker.store import store_batch
from footfall.shared import metrics
from footfall.shared.errors import UnavailableError
from footfall.shared.events.fast_import import FastRows
from footfall.shared.schema import hot
from footfall.shared.streams import EVENTS, Locator, Stream
from footfall.shared.streams.stream import PackedRows, insert_packed
from footfall.shared.warehouse import Warehouse, WarehouseError

log = structlog.get_logger(__name__)

T = TypeVar("T")

MAX_GROUP_ITEMS = 50_000  # one insert takes at most this many items (more only for one big batch)


@dataclass
class _Waiter:
    items: list[Any] | FastRows
    done: asyncio.Future[dict[int, str]]

    _keys: set[bytes] | None = None

    @property
    def size(self) -> int:
        return self.items.rows if isinstance(self.items, FastRows) else len(self.items)

    def key_set(self) -> set[bytes]:
        """A fast request's dedup keys, made once (a waiter may be looked at by several takes)."""
        if not isinstance(self.items, FastRows):
            raise TypeError("only fast rows carry packed keys")
        if self._keys is None:
            self._keys = self.items.key_set()
        return self._keys


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
        return await self._enqueue(stream, items)

    async def publish_fast(self, rows: FastRows) -> None:
        """The `/import` fast path's rows of one request, stored as they are (returns once stored)."""
        if EVENTS.name not in self.grouped:
            await self._store_fast(EVENTS, [rows])
        else:
            await self._enqueue(EVENTS, rows)

    async def _enqueue(self, stream: Stream[Any], items: list[Any] | FastRows) -> dict[int, str]:
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

    async def hot_columns(self) -> tuple[tuple[str, str], ...]:
        """The hot columns in use, for the migration's workers to fill (`RowsPublisher`)."""
        return hot.in_use_columns()

    async def _store(self, stream: Stream[T], items: list[T]) -> dict[int, str]:
        try:
            stored = await self.warehouse.run(store_batch, stream, self.warehouse, self.locator, items)
        except WarehouseError as exc:
            log.error("embedded_insert_failed", stream=stream.name, error=str(exc)[:2000])
            raise UnavailableError("storage unavailable, retry with backoff") from exc
        return stored.refused

    async def _store_fast(self, stream: Stream[Any], batch: list[FastRows]) -> None:
        packed = PackedRows([rows.block for rows in batch], sum(rows.rows for rows in batch), batch[0].columns)
        try:
            await self.warehouse.run(insert_packed, self.warehouse, stream.table, packed)
        except WarehouseError as exc:
            log.error("embedded_insert_failed", stream=stream.name, error=str(exc)[:2000])
            raise UnavailableError("storage unavailable, retry with backoff") from exc
        dropped = sum(rows.dropped for rows in batch)
        if dropped:
            metrics.DUPLICATES_DROPPED.labels("batch").inc(dropped)

    def _take(self, group: _Group) -> list[_Waiter]:
        """The next group: waiters of one kind (events, or fast rows of the same columns whose
        keys do not repeat), in order, up to `max_group_items` items (at least one waiter)."""
        first = group.waiting[0].items
        columns = first.columns if isinstance(first, FastRows) else None
        keys: set[bytes] = set()
        taken, count = 0, 0
        for waiter in group.waiting:
            kind = waiter.items.columns if isinstance(waiter.items, FastRows) else None
            if kind != columns or (taken and count + waiter.size > self.max_group_items):
                break
            if isinstance(waiter.items, FastRows):
                mine = waiter.key_set()
                if taken and not keys.isdisjoint(mine):
                    break
                keys |= mine
            count += waiter.size
            taken += 1
        batch, group.waiting = group.waiting[:taken], group.waiting[taken:]
        return batch

    async def _commit(self, stream: Stream[Any], group: _Group) -> None:
        """Insert what waits, group after group, until nothing does."""
        try:
            while group.waiting:
                batch = self._take(group)
                try:
                    if isinstance(batch[0].items, FastRows):
                        await self._store_fast(stream, [w.items for w in batch if isinstance(w.items, FastRows)])
                        refused: dict[int, str] = {}
                    else:
                        items = [item for w in batch if not isinstance(w.items, FastRows) for item in w.items]
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
                    end = offset + waiter.size
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
