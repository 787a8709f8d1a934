"""BatchProcessor, with in-memory twins of every IO seam: decode → dead letters → dedup
lookup → one insert (retried while the warehouse fails) → marks only after the insert —
through the Python path and through the events' fast path (`fast`: the Rust extension), which
must store the same rows and leave what it does not take to the Python path."""

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
from footfall.shared import metrics
from footfall.shared.events import Event
from footfall.shared.events.fast_records import FastRecords
from footfall.shared.kafka import Topics, accepted_header
from footfall.shared.streams import EVENTS, Place
from footfall.shared.streams.events import encode_event
from footfall.shared.warehouse import WarehouseError, native
from tests.fastpath import require_extension


@dataclass
class Rec:
    value: bytes | None
    offset: int = 0
    topic: str = "events.raw"
    partition: int = 0
    key: bytes | None = b"1:u"
    headers: list[tuple[str, bytes]] = field(default_factory=lambda: accepted_header(1))


class FakeWarehouse:
    """Collects inserted rows (as a Native block reads back, whichever insert brought them);
    fails the next `failures` inserts."""

    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.rows: list[dict[str, Any]] = []
        self.attempts = 0
        self.native_inserts: list[tuple[str, ...]] = []  # the columns of each Native insert

    def _attempt(self) -> None:
        self.attempts += 1
        if self.failures:
            self.failures -= 1
            raise WarehouseError("connection refused")

    def insert(
        self, table: str, columns: Sequence[str], data: Sequence[Sequence[Any]], *, column_oriented: bool = False
    ) -> None:
        self._attempt()
        assert table == "events" and column_oriented and tuple(columns) == EVENTS.table.column_names
        self._collect(native.decode(native.encode(table, columns, data)))

    def insert_native(self, table: str, columns: Sequence[str], blobs: Sequence[bytes], *, materialized: bool) -> None:
        self._attempt()
        assert table == "events" and tuple(columns[: len(EVENTS.table.column_names)]) == EVENTS.table.column_names
        assert materialized == (len(columns) > len(EVENTS.table.column_names))
        self.native_inserts.append(tuple(columns))
        self._collect(native.decode(b"".join(blobs)))

    def _collect(self, columns: dict[str, list[Any]]) -> None:
        names = EVENTS.table.column_names  # the hot columns' values are not compared here
        self.rows.extend(dict(zip(names, row, strict=True)) for row in zip(*(columns[n] for n in names), strict=True))

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


@pytest.fixture(params=["python", "fast"])
def path(request: pytest.FixtureRequest) -> str:
    if request.param == "fast":
        require_extension()
    return str(request.param)


def processor(
    warehouse: FakeWarehouse, dedup: MemoryDedup | None = None, *, path: str = "python", geo: bool = True
) -> tuple[BatchProcessor, MemoryDedup, MemoryDeadLetters]:
    dedup = dedup or MemoryDedup(3600)
    letters = MemoryDeadLetters()
    proc = BatchProcessor(
        Topics.for_prefix("").streams,
        warehouse,  # type: ignore[arg-type]
        Enricher(Geo() if geo else None),  # type: ignore[arg-type]
        dedup,
        letters,
        backoff_first=0.001,
        backoff_max=0.002,
        fast=FastRecords(geo=geo) if path == "fast" else None,
    )
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


def _delay_histogram() -> tuple[float, float]:
    """(count, sum) of footfall_worker_event_delay_seconds."""
    samples = {s.name: s.value for m in metrics.WORKER_EVENT_DELAY.collect() for s in m.samples}
    return samples["footfall_worker_event_delay_seconds_count"], samples["footfall_worker_event_delay_seconds_sum"]


def test_each_inserted_event_counts_once_in_the_delay_histogram(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three gateway requests (acceptance times in the headers) and one event without a
    header; then a retry, which the dedup layer drops: the inserted events' delays, each with
    its own request's time."""
    monkeypatch.setattr("footfall.services.worker.pipeline.time.time", lambda: 1_000.0)
    batch = records([event(i) for i in range(7)])
    for rec, accepted in zip(batch, [400_000, 400_000, 700_000, 700_000, 700_000, 990_000, None], strict=True):
        rec.headers = accepted_header(accepted) if accepted is not None else []
    proc, _, _ = processor(FakeWarehouse(), path=path, geo=False)
    count, total = _delay_histogram()
    assert asyncio.run(proc.process(batch)).inserted == 7
    retry = Rec(batch[0].value, offset=7, headers=accepted_header(10))
    assert asyncio.run(proc.process([retry])).duplicates == 1
    after_count, after_total = _delay_histogram()
    assert after_count - count == 6  # not the event without a header, nor the retry
    assert after_total - total == pytest.approx(2 * 600 + 3 * 300 + 10)


def test_a_changed_copy_is_inserted_so_the_latest_wins(path: str) -> None:
    wh = FakeWarehouse()
    proc, _, _ = processor(wh, path=path, geo=False)
    asyncio.run(proc.process(records([event(1)])))
    outcome = asyncio.run(proc.process(records([event(1, plan="changed")])))
    assert outcome.inserted == 1 and len(wh.rows) == 2


def test_in_batch_duplicates_keep_the_last_copy(path: str) -> None:
    wh = FakeWarehouse()
    proc, _, _ = processor(wh, path=path, geo=False)
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
def test_undecodable_records_are_dead_lettered_and_the_rest_stored(value: bytes | None, reason: str, path: str) -> None:
    wh = FakeWarehouse()
    proc, _, letters = processor(wh, path=path, geo=False)
    batch = [Rec(value, offset=0), *records([event(5)])]
    outcome = asyncio.run(proc.process(batch))
    assert (outcome.inserted, outcome.dead_lettered) == (1, 1)
    assert [(dl.reason, dl.offset, dl.value) for dl in letters.letters] == [(reason, 0, value)]


def test_insert_failures_are_retried_and_keys_marked_only_after_success(path: str) -> None:
    wh = FakeWarehouse(failures=3)
    proc, _dedup, _ = processor(wh, path=path, geo=False)
    outcome = asyncio.run(proc.process(records([event(1)])))
    assert outcome.done and outcome.inserted == 1 and wh.attempts == 4


def test_stopping_abandons_the_batch_without_marks(path: str) -> None:
    wh = FakeWarehouse(failures=100)
    proc, _dedup, _ = processor(wh, path=path, geo=False)
    calls = iter(range(100))
    outcome = asyncio.run(proc.process(records([event(1)]), stopping=lambda: next(calls) >= 2))
    assert not outcome.done and wh.rows == []
    # Nothing was marked: once the warehouse is back the event is stored.
    wh.failures = 0
    assert asyncio.run(proc.process(records([event(1)]))).inserted == 1


def taken() -> float:
    return metrics.WORKER_FAST_PATH.labels("taken")._value.get()


def test_the_fast_path_stores_the_python_paths_rows_and_marks() -> None:
    require_extension()
    batch = [event(1), event(2, plan="pro", nested={"a": [1, 2.5, None]}), event(3), event(2, plan="team")]
    batch.append(Event(7, "Other project", 1_700_000_000_009, "u9", "id-9", {"é": "ü"}, ip=None))
    stored = {}
    for path in ("python", "fast"):
        wh, dedup = FakeWarehouse(), MemoryDedup(3600)
        proc, _, _ = processor(wh, dedup, path=path, geo=False)
        before = taken()
        outcome = asyncio.run(proc.process(records(batch)))
        assert taken() - before == (1 if path == "fast" else 0)
        assert (outcome.inserted, outcome.duplicates, outcome.dead_lettered) == (4, 1, 0)
        # Sent again: the plain retries are dropped; the earlier copy of event 2 differs from the one
        # marked (the later), so it goes through again, as a changed copy does.
        again = asyncio.run(proc.process(records(batch)))
        assert (again.inserted, again.duplicates) == (1, 4)
        stored[path] = [{k: v for k, v in row.items() if k != "ingested_at"} for row in wh.rows[:4]]
    assert stored["fast"] == stored["python"]
    assert orjson.loads(stored["fast"][1]["properties"])["plan"] == "team"  # the last copy, in the first's place


def test_the_fast_path_leaves_addresses_to_locate_to_the_python_path() -> None:
    require_extension()
    wh = FakeWarehouse()
    proc, _, _ = processor(wh, path="fast", geo=True)
    before = taken()
    assert asyncio.run(proc.process(records([event(1)]))).inserted == 1
    assert taken() == before and wh.rows[0]["city"] == "London"


def test_a_retried_insert_leaves_the_hot_columns_to_the_engine() -> None:
    require_extension()
    wh = FakeWarehouse(failures=1)
    proc, _, _ = processor(wh, path="python", geo=False)
    proc.fast = FastRecords(geo=False, hot_columns=lambda: (("n", "hp_n"),))
    assert asyncio.run(proc.process(records([event(1)]))).inserted == 1
    assert wh.native_inserts == [EVENTS.table.column_names]  # the first attempt (with hp_n) failed
    wh2 = FakeWarehouse()
    proc.warehouse = wh2  # type: ignore[assignment]
    assert asyncio.run(proc.process(records([event(2)]))).inserted == 1
    assert wh2.native_inserts == [(*EVENTS.table.column_names, "hp_n")]
