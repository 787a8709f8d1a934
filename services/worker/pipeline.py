"""One consumed batch, start to finish, before its offsets may be committed:

1. decode each record (`shared.kafka.codec`); what does not decode goes to the
   dead-letter topic with the reason;
2. look the events' dedup keys up (`DedupStore`); drop those seen recently with the
   same content (a retry);
3. enrich and build the rows (`process.build_batch`, the embedded path's code) and
   insert them in one statement (`write.insert_batch`), retrying with backoff while
   the warehouse fails;
4. only after the insert succeeded, mark the inserted keys.

`process()` returns True when the batch is done (the caller commits) and False when it
gave the batch up because the worker is stopping (the caller must not commit).
No Kafka consumer calls here; the IO seams are injected.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from footfall.services.worker.dedup import DedupStore
from footfall.services.worker.dlq import DeadLetter, DeadLetterSink
from footfall.services.worker.enrich import Enricher
from footfall.services.worker.process import build_batch
from footfall.services.worker.write import insert_batch
from footfall.shared import metrics
from footfall.shared.events import Event
from footfall.shared.events.model import event_dedup_key
from footfall.shared.kafka.codec import CodecError, accepted_ms_of, content_digest, decode_event
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
    events: list[Event]
    digests: list[bytes]  # content digest of each event's record value
    accepted: list[int]  # gateway acceptance time (ms, 0 if unknown)
    letters: list[DeadLetter]


def decode_records(records: Sequence[Any]) -> Decoded:
    out = Decoded([], [], [], [])
    for r in records:
        try:
            event = decode_event(r.value)
        except CodecError as exc:
            out.letters.append(DeadLetter(r.topic, r.partition, r.offset, r.key, r.value, exc.reason, str(exc)))
            continue
        out.events.append(event)
        out.digests.append(content_digest(r.value))
        out.accepted.append(accepted_ms_of(r.headers))
    return out


class BatchProcessor:
    def __init__(
        self,
        warehouse: Warehouse,
        enricher: Enricher,
        dedup: DedupStore,
        dead_letters: DeadLetterSink,
        *,
        backoff_first: float = BACKOFF_FIRST,
        backoff_max: float = BACKOFF_MAX,
    ) -> None:
        self.warehouse = warehouse
        self.enricher = enricher
        self.dedup = dedup
        self.dead_letters = dead_letters
        self.backoff_first = backoff_first
        self.backoff_max = backoff_max

    def _store(self, events: list[Event]) -> tuple[list[bytes], int]:
        """Runs in the warehouse's thread pool: rows, then one insert."""
        batch, dropped = build_batch(events, self.enricher, int(time.time() * 1000))
        insert_batch(self.warehouse, batch)
        return batch.keys, dropped

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
        decoded = decode_records(records)
        outcome = Outcome(dead_lettered=len(decoded.letters))
        if decoded.letters:
            letters = decoded.letters
            ok, _ = await self._retrying("dead_letter", lambda: self.dead_letters.send(letters), stopping)
            if not ok:
                return Outcome(done=False)

        keys = [event_dedup_key(e) for e in decoded.events]
        seen = await self.dedup.seen(keys, decoded.digests)
        fresh = [i for i, s in enumerate(seen) if not s]
        outcome.duplicates = len(keys) - len(fresh)
        if outcome.duplicates:
            metrics.DUPLICATES_DROPPED.labels("redis").inc(outcome.duplicates)

        if fresh:
            events = [decoded.events[i] for i in fresh]
            ok, stored = await self._retrying("insert", lambda: self.warehouse.run(self._store, events), stopping)
            if not ok:
                return Outcome(done=False)
            inserted_keys, in_batch_dupes = stored
            if in_batch_dupes:
                metrics.DUPLICATES_DROPPED.labels("batch").inc(in_batch_dupes)
            outcome.duplicates += in_batch_dupes
            outcome.inserted = len(inserted_keys)
            # build_batch keeps the last copy of a key; so does this map.
            digest_of = {keys[i]: decoded.digests[i] for i in fresh}
            await self.dedup.mark(inserted_keys, [digest_of[k] for k in inserted_keys])
            now_ms = time.time() * 1000
            for i in fresh:
                if decoded.accepted[i]:
                    metrics.WORKER_EVENT_DELAY.observe(max(now_ms - decoded.accepted[i], 0.0) / 1000)

        metrics.WORKER_MESSAGES.labels("inserted").inc(outcome.inserted)
        metrics.WORKER_MESSAGES.labels("duplicate").inc(outcome.duplicates)
        metrics.WORKER_MESSAGES.labels("dead_lettered").inc(outcome.dead_lettered)
        return outcome
