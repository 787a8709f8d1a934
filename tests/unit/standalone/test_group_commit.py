"""The embedded sink's group commit: requests that publish while an insert runs share the next
insert; each is answered with its own refusals; a failed insert fails every request of its
group (503) and nothing of it is acknowledged; a request whose client left does not stop the
insert the others wait for. A fake warehouse stands in for chDB (no IO)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from footfall.services.standalone.sink import EmbeddedSink
from footfall.shared.errors import UnavailableError
from footfall.shared.events.fast_import import FastRows
from footfall.shared.schema.catalog import EVENTS as EVENTS_TABLE
from footfall.shared.streams import Place, Stored, Stream
from footfall.shared.warehouse import WarehouseError


class NoPlace:
    def place(self, ip: str | None) -> Place:
        return Place()


class Store:
    """A stream's store step that records each batch; it refuses items whose value is
    negative, and fails a whole batch that holds the value `fail`."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.gate = asyncio.Event()

    def __call__(self, warehouse: Any, locator: Any, items: Sequence[int], ingested_at_ms: int) -> Stored:
        self.batches.append(list(items))
        if any(i == 666 for i in items):
            raise WarehouseError("disk full")
        return Stored(refused={n: f"negative {v}" for n, v in enumerate(items) if v < 0})


class Warehouse:
    """`run` waits for the store's gate, so the test decides when an insert ends."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.running = 0

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        self.running += 1
        try:
            await self.store.gate.wait()
            return fn(*args)
        finally:
            self.running -= 1


def stream(name: str, store: Store) -> Stream[int]:
    def fail(*_: Any) -> Any:
        raise AssertionError("not used by the embedded sink")

    return Stream(name, EVENTS_TABLE, fail, fail, fail, fail, fail, store)


async def until(condition: Callable[[], bool]) -> None:
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never held")


def test_requests_during_an_insert_share_the_next_one_and_get_their_own_refusals() -> None:
    async def scenario() -> None:
        store = Store()
        warehouse = Warehouse(store)
        sink = EmbeddedSink(warehouse, NoPlace(), grouped={"events"})  # type: ignore[arg-type]
        events = stream("events", store)
        first = asyncio.create_task(sink.publish(events, [1, 2]))
        await until(lambda: warehouse.running == 1)
        # Three requests arrive while the first insert runs.
        others = [asyncio.create_task(sink.publish(events, batch)) for batch in ([3, -4], [5], [-6, 7, -8])]
        await until(lambda: len(sink._groups["events"].waiting) == 3)
        store.gate.set()
        assert await first == {}
        assert [await t for t in others] == [{1: "negative -4"}, {}, {0: "negative -6", 2: "negative -8"}]
        assert store.batches == [[1, 2], [3, -4, 5, -6, 7, -8]]  # two inserts for four requests
        await sink.stop()

    asyncio.run(scenario())


def test_a_group_is_bounded_and_a_lone_request_is_inserted_at_once() -> None:
    async def scenario() -> None:
        store = Store()
        store.gate.set()
        sink = EmbeddedSink(Warehouse(store), NoPlace(), grouped={"events"}, max_group_items=3)  # type: ignore[arg-type]
        events = stream("events", store)
        assert await sink.publish(events, [1]) == {}
        assert store.batches == [[1]]
        store.batches.clear()
        store.gate.clear()
        tasks = [asyncio.create_task(sink.publish(events, b)) for b in ([1, 2], [3], [4], [5, 6, 7, 8], [9])]
        await until(lambda: len(store.batches) == 0 and len(sink._groups["events"].waiting) == 5)
        store.gate.set()
        await asyncio.gather(*tasks)
        # The first group takes what fits in 3 items; a batch larger than the bound goes alone.
        assert store.batches == [[1, 2, 3], [4], [5, 6, 7, 8], [9]]

    asyncio.run(scenario())


def test_a_failed_insert_fails_every_request_of_its_group_and_the_next_group_goes_on() -> None:
    async def scenario() -> None:
        store = Store()
        warehouse = Warehouse(store)
        sink = EmbeddedSink(warehouse, NoPlace(), grouped={"events"})  # type: ignore[arg-type]
        events = stream("events", store)
        first = asyncio.create_task(sink.publish(events, [1]))
        await until(lambda: warehouse.running == 1)
        doomed = [asyncio.create_task(sink.publish(events, b)) for b in ([2], [666], [3])]
        await until(lambda: len(sink._groups["events"].waiting) == 3)
        store.gate.set()
        assert await first == {}
        for task in doomed:
            with pytest.raises(UnavailableError) as raised:
                await task
            assert raised.value.status == 503 and raised.value.retry_after == 2
        assert await sink.publish(events, [4]) == {}
        assert store.batches == [[1], [2, 666, 3], [4]]

    asyncio.run(scenario())


def test_a_client_that_leaves_does_not_cancel_the_insert_of_its_group() -> None:
    async def scenario() -> None:
        store = Store()
        warehouse = Warehouse(store)
        sink = EmbeddedSink(warehouse, NoPlace(), grouped={"events"})  # type: ignore[arg-type]
        events = stream("events", store)
        first = asyncio.create_task(sink.publish(events, [1]))
        await until(lambda: warehouse.running == 1)
        gone = asyncio.create_task(sink.publish(events, [2]))
        stays = asyncio.create_task(sink.publish(events, [-3]))
        await until(lambda: len(sink._groups["events"].waiting) == 2)
        gone.cancel()
        store.gate.set()
        assert await first == {}
        assert await stays == {0: "negative -3"}
        assert gone.cancelled()
        assert store.batches == [[1], [2, -3]]  # stored all the same (the client may retry: dedup)

    asyncio.run(scenario())


def test_streams_not_grouped_keep_one_insert_per_request() -> None:
    async def scenario() -> None:
        store = Store()
        warehouse = Warehouse(store)
        sink = EmbeddedSink(warehouse, NoPlace(), grouped={"events"})  # type: ignore[arg-type]
        updates = stream("user_updates", store)
        tasks = [asyncio.create_task(sink.publish(updates, b)) for b in ([1], [-2], [3])]
        await until(lambda: warehouse.running == 3)
        store.gate.set()
        assert await asyncio.gather(*tasks) == [{}, {0: "negative -2"}, {}]
        assert sorted(store.batches) == [[-2], [1], [3]]
        with pytest.raises(UnavailableError):
            await sink.publish(updates, [666])

    asyncio.run(scenario())


class NativeWarehouse(Warehouse):
    """Also takes the fast path's Native blocks: each insert of blocks lands in `store.batches`
    as the blocks' contents, beside the batches of events."""

    def insert_native(
        self, table: str, columns: Sequence[str], blocks: Sequence[bytes], *, materialized: bool = False
    ) -> None:
        assert table == "events" and list(columns[:11]) == list(EVENTS_TABLE.column_names)
        assert materialized == (len(columns) > 11)  # hot columns given: the engine must take them
        if any(block == b"fail" for block in blocks):
            raise WarehouseError("disk full")
        self.store.batches.append([block.decode() for block in blocks])  # type: ignore[misc]


def fast_rows(block: str, *keys: int, items: int | None = None, hot: tuple[str, ...] = ()) -> FastRows:
    encoded = b"".join(key.to_bytes(16, "big") for key in keys)
    columns = EVENTS_TABLE.column_names + hot
    return FastRows(block.encode(), encoded, items if items is not None else len(keys), len(keys), columns)


def test_fast_rows_share_inserts_and_a_repeated_key_other_columns_or_events_start_the_next_one() -> None:
    async def scenario() -> None:
        store = Store()
        warehouse = NativeWarehouse(store)
        sink = EmbeddedSink(warehouse, NoPlace(), grouped={"events"})  # type: ignore[arg-type]
        events = stream("events", store)
        first = asyncio.create_task(sink.publish(events, [1]))
        await until(lambda: warehouse.running == 1)
        waiting = [
            sink.publish_fast(fast_rows("A", 1, 2)),
            sink.publish_fast(fast_rows("B", 3, items=2)),  # a duplicate inside its request was dropped
            sink.publish_fast(fast_rows("C", 2, 4)),  # a later copy of an event of A: the next insert
            sink.publish_fast(fast_rows("D", 5)),
            sink.publish(events, [2, -3]),
            sink.publish_fast(fast_rows("E", 6)),
            sink.publish_fast(fast_rows("F", 7, hot=("hp_x_00000000",))),  # other columns: another insert
            sink.publish_fast(fast_rows("G", 8, hot=("hp_x_00000000",))),
        ]
        tasks = [asyncio.create_task(w) for w in waiting]  # type: ignore[arg-type]
        await until(lambda: len(sink._groups["events"].waiting) == 8)
        store.gate.set()
        assert await first == {}
        assert [await t for t in tasks] == [None, None, None, None, {1: "negative -3"}, None, None, None]
        expected = [[1], ["A", "B"], ["C", "D"], [2, -3], ["E"], ["F", "G"]]
        assert store.batches == expected  # type: ignore[comparison-overlap]
        await sink.stop()

    asyncio.run(scenario())


def test_a_failed_insert_of_fast_rows_fails_its_group_only() -> None:
    async def scenario() -> None:
        store = Store()
        warehouse = NativeWarehouse(store)
        sink = EmbeddedSink(warehouse, NoPlace(), grouped={"events"})  # type: ignore[arg-type]
        events = stream("events", store)
        first = asyncio.create_task(sink.publish(events, [1]))
        await until(lambda: warehouse.running == 1)
        doomed = [asyncio.create_task(sink.publish_fast(fast_rows(b, k))) for b, k in (("A", 1), ("fail", 2))]
        after = asyncio.create_task(sink.publish(events, [3]))
        await until(lambda: len(sink._groups["events"].waiting) == 3)
        store.gate.set()
        await first
        for task in doomed:
            with pytest.raises(UnavailableError):
                await task
        assert await after == {}
        assert store.batches == [[1], [3]]

    asyncio.run(scenario())


def test_fast_rows_go_straight_in_when_events_are_not_grouped() -> None:
    async def scenario() -> None:
        store = Store()
        store.gate.set()
        sink = EmbeddedSink(NativeWarehouse(store), NoPlace())  # type: ignore[arg-type]
        await sink.publish_fast(fast_rows("A", 1))
        assert store.batches == [["A"]]  # type: ignore[comparison-overlap]

    asyncio.run(scenario())
