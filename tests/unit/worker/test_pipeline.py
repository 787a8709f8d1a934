"""BatchProcessor, with in-memory twins of every IO seam: decode → dead letters → dedup
lookup → one insert (retried while the warehouse fails) → marks only after the insert."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest

from footfall.services.worker.dedup import MemoryDedup
from footfall.services.worker.dlq import MemoryDeadLetters
from footfall.services.worker.enrich import Enricher
from footfall.services.worker.pipeline import BatchProcessor
from footfall.shared.events import Event
from footfall.shared.kafka import Topics, accepted_header
from footfall.shared.streams import EVENTS, Place
from footfall.shared.streams.events import encode_event
from footfall.shared.warehouse import WarehouseError


@dataclass
class Rec:
    value: bytes | None
    offset: int = 0
    topic: str = "events.raw"
    partition: int = 0
    key: bytes | None = b"1:u"
    headers: list[tuple[str, bytes]] = field(default_factory=lambda: accepted_header(1))


class FakeWarehouse:
    """Collects inserted rows; fails the next `failures` inserts."""

    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.rows: list[dict[str, Any]] = []
        self.attempts = 0

    def insert(
        self, table: str, columns: Sequence[str], data: Sequence[Sequence[Any]], *, column_oriented: bool = False
    ) -> None:
        self.attempts += 1
        if self.failures:
            self.failures -= 1
            raise WarehouseError("connection refused")
        assert table == "events" and column_oriented and tuple(columns) == EVENTS.table.column_names
        self.rows.extend(dict(zip(columns, row, strict=True)) for row in zip(*data, strict=True))

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        return fn(*args)


class Geo:
    def lookup(self, ip: str) -> Place:
        return Place("London", "England", "GB")

    def close(self) -> None:
        return None


def event(i: int, **props: Any) -> Event:
    return Event(1, "Signed up", 1_700_000_000_000 + i, f"u{i}", f"id-{i}", {"n": i, **props}, ip="81.2.69.160")


def records(events: list[Event]) -> list[Rec]:
    return [Rec(encode_event(e), offset=i) for i, e in enumerate(events)]


def processor(
    warehouse: FakeWarehouse, dedup: MemoryDedup | None = None
) -> tuple[BatchProcessor, MemoryDedup, MemoryDeadLetters]:
    dedup = dedup or MemoryDedup(3600)
    letters = MemoryDeadLetters()
    proc = BatchProcessor(
        Topics.for_prefix("").streams,
        warehouse,
        Enricher(Geo()),
        dedup,
        letters,
        backoff_first=0.001,
        backoff_max=0.002,
    )  # type: ignore[arg-type]
    return proc, dedup, letters


def test_stores_enriched_rows_and_marks_them() -> None:
    wh = FakeWarehouse()
    proc, _dedup, _ = processor(wh)
    outcome = asyncio.run(proc.process(records([event(1), event(2)])))
    assert (outcome.inserted, outcome.duplicates, outcome.dead_lettered, outcome.done) == (2, 0, 0, True)
    assert [r["insert_id"] for r in wh.rows] == ["id-1", "id-2"]
    assert wh.rows[0]["city"] == "London"
    assert orjson.loads(wh.rows[0]["properties"])["mp_country_code"] == "GB"
    again = asyncio.run(proc.process(records([event(1), event(2)])))
    assert (again.inserted, again.duplicates) == (0, 2)
    assert len(wh.rows) == 2


def test_a_changed_copy_is_inserted_so_the_latest_wins() -> None:
    wh = FakeWarehouse()
    proc, _, _ = processor(wh)
    asyncio.run(proc.process(records([event(1)])))
    outcome = asyncio.run(proc.process(records([event(1, plan="changed")])))
    assert outcome.inserted == 1 and len(wh.rows) == 2


def test_in_batch_duplicates_keep_the_last_copy() -> None:
    wh = FakeWarehouse()
    proc, _, _ = processor(wh)
    outcome = asyncio.run(proc.process(records([event(1), event(1, plan="later")])))
    assert (outcome.inserted, outcome.duplicates) == (1, 1)
    assert orjson.loads(wh.rows[0]["properties"])["plan"] == "later"


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (b"{nope", "json"),
        (b"[1]", "envelope"),
        (b'{"v": 2}', "version"),
        (None, "empty"),
        (orjson.dumps({"v": 1, "p": True, "e": "x", "t": 1, "d": "u", "i": "i", "pr": {}}), "field"),
    ],
    ids=["not-json", "not-object", "version", "tombstone", "bool-project"],
)
def test_undecodable_records_are_dead_lettered_and_the_rest_stored(value: bytes | None, reason: str) -> None:
    wh = FakeWarehouse()
    proc, _, letters = processor(wh)
    batch = [Rec(value, offset=0), *records([event(5)])]
    outcome = asyncio.run(proc.process(batch))
    assert (outcome.inserted, outcome.dead_lettered) == (1, 1)
    assert [(dl.reason, dl.offset, dl.value) for dl in letters.letters] == [(reason, 0, value)]


def test_insert_failures_are_retried_and_keys_marked_only_after_success() -> None:
    wh = FakeWarehouse(failures=3)
    proc, _dedup, _ = processor(wh)
    outcome = asyncio.run(proc.process(records([event(1)])))
    assert outcome.done and outcome.inserted == 1 and wh.attempts == 4


def test_stopping_abandons_the_batch_without_marks() -> None:
    wh = FakeWarehouse(failures=100)
    proc, _dedup, _ = processor(wh)
    calls = iter(range(100))
    outcome = asyncio.run(proc.process(records([event(1)]), stopping=lambda: next(calls) >= 2))
    assert not outcome.done and wh.rows == []
    # Nothing was marked: once the warehouse is back the event is stored.
    wh.failures = 0
    assert asyncio.run(proc.process(records([event(1)]))).inserted == 1
