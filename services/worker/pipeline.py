"""One consumed batch, start to finish, before its offsets may be committed.

A batch may hold records of several streams (one consumer subscribes to every stream's
topic); each stream's records are handled in turn, in the order consumed:

1. decode each record with its stream's codec; what does not decode goes to the
   dead-letter topic with the reason;
2. look the items' dedup keys up (`DedupStore`); drop those seen recently with the
   same content (a retry);
3. store the rest (`store.store_batch`, the embedded path's code: in-batch dedup, rows,
   one insert), retrying with backoff while the warehouse fails;
4. only after the insert succeeded, mark the inserted keys.

The events stream has a fast path for the same steps (`fast`, `footfall.shared.events.
fast_records`: Rust, off the GIL): when every record of the batch is an envelope the codec
takes as it is and none needs enriching, it decodes them, gives the keys and digests and
builds the rows of the fresh ones as one Native block; else the steps above run.

`process()` returns an `Outcome` whose `done` is True when the batch is finished (the
caller commits) and False when it gave the batch up because the worker is stopping (the
caller must not commit). No Kafka consumer calls here; the IO seams are injected.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from footfall.services.worker.dedup import DedupStore
from footfall.services.worker.dlq import DeadLetter, DeadLetterSink
from footfall.services.worker.store import Stored, store_batch
from footfall.shared import metrics
from footfall.shared.events.fast_records import DecodedRecords, FastRecords
from footfall.shared.kafka import accepted_ms_of, content_digest
from footfall.shared.streams import EVENTS, CodecError, Locator, Stream
from footfall.shared.streams.stream import PackedRows, insert_packed
from footfall.shared.warehouse import Warehouse

log = structlog.get_logger(__name__)

BACKOFF_FIRST = 0.5
BACKOFF_MAX = 30.0


@dataclass
class Outcome:
    inserted: int = 0
    duplicates: int = 0
    dead_lettered: int = 0
    done: bool = True


@dataclass
class Decoded:
    items: list[Any]
    digests: list[bytes]  # content digest of each item's record value
    accepted: list[int]  # gateway acceptance time (ms, 0 if unknown)
    letters: list[DeadLetter]


def decode_records(stream: Stream[Any], records: Sequence[Any]) -> Decoded:
    out = Decoded([], [], [], [])
    decode = stream.decode
    for r in records:
        try:
            item = decode(r.value)
        except CodecError as exc:
            out.letters.append(DeadLetter(r.topic, r.partition, r.offset, r.key, r.value, exc.reason, str(exc)))
            continue
        out.items.append(item)
        out.digests.append(content_digest(r.value))
        out.accepted.append(accepted_ms_of(r.headers))
    return out


def observe_many(histogram: Any, value: float, times: int) -> None:
    """`histogram.observe(value)` `times` times, in one step where prometheus_client's
    histogram exposes its sum and buckets (0.26: `_sum`, `_upper_bounds`, `_buckets`, as its
    own `observe` uses them); else by calling `observe`."""
    total, bounds, buckets = (getattr(histogram, name, None) for name in ("_sum", "_upper_bounds", "_buckets"))
    if total is None or bounds is None or buckets is None:
        for _ in range(times):
            histogram.observe(value)
        return
    total.inc(value * times)
    for bound, bucket in zip(bounds, buckets, strict=True):
        if value <= bound:
            bucket.inc(times)
            break


def observe_delays(accepted: Iterable[int], now_ms: float) -> None:
    """The accepted → inserted delay of every event with an acceptance time: the events of
    one gateway request share it, so one histogram step per request rather than per event
    (an `observe` call per event cost ~1–2.5 µs of the worker's CPU per event)."""
    _observe_counted(Counter(a for a in accepted if a), now_ms)


def observe_header_delays(headers: Iterable[Sequence[tuple[str, bytes]]], now_ms: float) -> None:
    """`observe_delays` from the records' headers: the records of one gateway request carry
    equal headers, so each distinct one is read once (reading every record's header was
    ~2 % of a loaded worker's samples)."""
    counted: Counter[int] = Counter()
    for header, count in Counter(tuple(h or ()) for h in headers).items():
        at = accepted_ms_of(header)
        if at:
            counted[at] += count
    _observe_counted(counted, now_ms)


def _observe_counted(counted: Mapping[int, int], now_ms: float) -> None:
    for at, count in counted.items():
        observe_many(metrics.WORKER_EVENT_DELAY, max(now_ms - at, 0.0) / 1000, count)


def by_topic(records: Sequence[Any]) -> dict[str, list[Any]]:
    """The records of each topic, in consumed order (topics in order of first appearance)."""
    grouped: dict[str, list[Any]] = {}
    for r in records:
        grouped.setdefault(r.topic, []).append(r)
    return grouped


class BatchProcessor:
    def __init__(
        self,
        streams: Mapping[str, Stream[Any]],
        warehouse: Warehouse,
        locator: Locator,
        dedup: DedupStore,
        dead_letters: DeadLetterSink,
        *,
        backoff_first: float = BACKOFF_FIRST,
        backoff_max: float = BACKOFF_MAX,
        fast: FastRecords | None = None,
    ) -> None:
        self.streams = dict(streams)  # topic -> stream
        self.fast = fast  # the events stream's fast path
        self.warehouse = warehouse
        self.locator = locator
        self.dedup = dedup
        self.dead_letters = dead_letters
        self.backoff_first = backoff_first
        self.backoff_max = backoff_max

    async def _retrying(self, what: str, step: Callable[[], Any], stopping: Callable[[], bool]) -> tuple[bool, Any]:
        """Run `step` until it succeeds; give up (False) only when the worker is stopping."""
        delay = self.backoff_first
        attempt = 0
        while True:
            attempt += 1
            try:
                return True, await step()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if what == "insert":
                    metrics.WORKER_INSERT_RETRIES.inc()
                log.error(f"{what}_failed", attempt=attempt, retry_in=round(delay, 2), error=str(exc)[:1000])
                if stopping():
                    log.warning(f"{what}_abandoned", detail="stopping: offsets of this batch are not committed")
                    return False, None
            await asyncio.sleep(delay)
            if stopping():
                return False, None
            delay = min(delay * 2, self.backoff_max)

    async def process(self, records: Sequence[Any], stopping: Callable[[], bool] = lambda: False) -> Outcome:
        metrics.WORKER_BATCH_MESSAGES.observe(len(records))
        total = Outcome()
        for topic, group in by_topic(records).items():
            stream = self.streams.get(topic)
            if stream is None:
                raise RuntimeError(f"consumed a record of topic {topic!r}, which carries no known stream")
            outcome = await self._process_stream(stream, group, stopping)
            if not outcome.done:
                return Outcome(done=False)
            total.inserted += outcome.inserted
            total.duplicates += outcome.duplicates
            total.dead_lettered += outcome.dead_lettered
        metrics.WORKER_MESSAGES.labels("inserted").inc(total.inserted)
        metrics.WORKER_MESSAGES.labels("duplicate").inc(total.duplicates)
        metrics.WORKER_MESSAGES.labels("dead_lettered").inc(total.dead_lettered)
        return total

    async def _process_stream(
        self, stream: Stream[Any], records: Sequence[Any], stopping: Callable[[], bool]
    ) -> Outcome:
        if self.fast is not None and stream is EVENTS:
            values = [r.value for r in records]
            fast = None if None in values else await asyncio.to_thread(self.fast.decode, values)
            metrics.WORKER_FAST_PATH.labels("declined" if fast is None else "taken").inc()
            if fast is not None:
                return await self._store_fast(stream, records, fast, stopping)
        decoded = decode_records(stream, records)
        outcome = Outcome(dead_lettered=len(decoded.letters))
        if decoded.letters:
            letters = decoded.letters
            ok, _ = await self._retrying("dead_letter", lambda: self.dead_letters.send(letters), stopping)
            if not ok:
                return Outcome(done=False)

        keys = [stream.dedup_key(item) for item in decoded.items]
        fresh = await self._fresh(keys, decoded.digests, outcome)
        if not fresh:
            return outcome

        items = [decoded.items[i] for i in fresh]
        ok, stored = await self._retrying(
            "insert", lambda: self.warehouse.run(store_batch, stream, self.warehouse, self.locator, items), stopping
        )
        if not ok:
            return Outcome(done=False)
        if not isinstance(stored, Stored):
            raise AssertionError("store_batch returns Stored")
        for reason in stored.refused.values():
            metrics.ITEMS_REFUSED.labels(stream.name, reason).inc()
        outcome.duplicates += stored.dropped
        outcome.inserted = len(stored.keys)
        # store_batch keeps the last copy of a key; so does this map.
        digest_of = {keys[i]: decoded.digests[i] for i in fresh}
        await self.dedup.mark(stored.keys, [digest_of[k] for k in stored.keys])
        observe_delays((decoded.accepted[i] for i in fresh), time.time() * 1000)
        return outcome

    async def _fresh(self, keys: Sequence[bytes], digests: Sequence[bytes], outcome: Outcome) -> list[int]:
        """Step 2: the indices of the items the Redis layer has not seen (the rest counted as
        duplicates in `outcome`)."""
        seen = await self.dedup.seen(keys, digests)
        fresh = [i for i, s in enumerate(seen) if not s]
        outcome.duplicates = len(keys) - len(fresh)
        if outcome.duplicates:
            metrics.DUPLICATES_DROPPED.labels("redis").inc(outcome.duplicates)
        return fresh

    async def _store_fast(
        self, stream: Stream[Any], records: Sequence[Any], decoded: DecodedRecords, stopping: Callable[[], bool]
    ) -> Outcome:
        """Steps 2–4 for a batch the fast path decoded (no dead letters: every record decoded)."""
        outcome = Outcome()
        fresh = await self._fresh(decoded.keys(), decoded.digests(), outcome)
        if not fresh:
            return outcome
        ingested_at_ms = int(time.time() * 1000)
        first = await asyncio.to_thread(decoded.block, fresh, ingested_at_ms=ingested_at_ms)
        attempts = 0

        def insert() -> Any:
            # A retry leaves the hot columns to the engine: the block is then the table's own
            # columns, which an insert cannot fail on for a hot column gone meanwhile.
            nonlocal attempts
            attempts += 1
            block = first if attempts == 1 else decoded.block(fresh, ingested_at_ms=ingested_at_ms, hot=False)
            insert_packed(self.warehouse, stream.table, PackedRows([block.block], block.rows, block.columns))
            return block

        ok, _ = await self._retrying("insert", lambda: self.warehouse.run(insert), stopping)
        if not ok:
            return Outcome(done=False)
        if first.dropped:
            metrics.DUPLICATES_DROPPED.labels("batch").inc(first.dropped)
        outcome.duplicates += first.dropped
        outcome.inserted = first.rows
        await self.dedup.mark(first.keys, first.digests)
        observe_header_delays((records[i].headers for i in fresh), time.time() * 1000)
        return outcome
