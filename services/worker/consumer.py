"""Kafka wiring of a worker consumer: poll → batch → `BatchProcessor` → commit.

One consumer subscribes to every stream's topic; the processor handles each stream's
records of a batch with that stream's description, so adding a stream touches nothing here.

Why plain aiokafka and not faust-streaming (the issue's first choice): the rules of
this worker are about *which* offsets get committed and *when*, and faust decides that
itself:

* faust acks events and commits acked offsets from a background timer
  (`broker_commit_every` / `broker_commit_interval`), not at a point the agent chooses;
* `Stream.take()` — faust's batching — acks the buffered events in a `finally:` block,
  i.e. also when the agent's insert raised or the task was cancelled by SIGTERM, so
  offsets of events that never reached ClickHouse would be committed: a lost event;
* one faust `App` is one consumer with one `Worker` owning the process's event loop;
  running several consumers of the group in one process — required where chDB is the
  store, since only one process may open it — is not something faust supports;
* an agent that blocks for minutes while ClickHouse is down trips faust's livelock and
  stream-timeout machinery, which is built for short per-event work.

With aiokafka the loop below is the whole contract: offsets are committed explicitly,
per partition, only for records whose batch was inserted (or dead-lettered), after the
dedup marks; a rebalance first finishes the batch in hand; SIGTERM finishes or abandons
it; several `WorkerConsumer`s share one event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import structlog
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import CommitFailedError, IllegalStateError, KafkaError

from footfall.services.worker.batch import BatchBuffer
from footfall.services.worker.pipeline import BatchProcessor
from footfall.shared import metrics
from footfall.shared.lifecycle import Stopping, bounded

log = structlog.get_logger(__name__)

# aiokafka's defaults, made explicit: a consumer that stops heartbeating (SIGKILL) is
# replaced after SESSION_TIMEOUT_MS; one whose batch takes longer than MAX_POLL_INTERVAL_MS
# (ClickHouse down) keeps heartbeating and keeps its partitions.
SESSION_TIMEOUT_MS = 10_000
HEARTBEAT_INTERVAL_MS = 3_000
MAX_POLL_INTERVAL_MS = 300_000
LAG_REPORT_SECONDS = 1.0
# A stop's budget (footfall.shared.lifecycle: the process exits within 5 s of SIGTERM):
# the loop finishes or abandons its batch within STOP_LOOP_SECONDS, then the consumer
# leaves its group (LeaveGroup, so a restart does not wait out SESSION_TIMEOUT_MS).
STOP_LOOP_SECONDS = 1.2
LEAVE_SECONDS = 0.8


class WorkerConsumer(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(
        self,
        name: str,
        *,
        bootstrap: str,
        topics: list[str],
        group: str,
        processor: BatchProcessor,
        batch_size: int,
        batch_seconds: float,
    ) -> None:
        self.name = name
        self.bootstrap = bootstrap
        self.topics = list(topics)
        self.group = group
        self.processor = processor
        self.buffer = BatchBuffer(batch_size, batch_seconds)
        self.batch_size = batch_size
        self._consumer: AIOKafkaConsumer | None = None
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self._stopping = False
        self._stopped = Stopping()  # wakes a restart backoff at once on stop()
        self._committed: dict[TopicPartition, int] = {}
        self._lag_reported = 0.0
        self.last_batch_at: float | None = None
        self.failed: BaseException | None = None

    # -- lifecycle ----------------------------------------------------------------------
    def _new_consumer(self) -> AIOKafkaConsumer:
        return AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            client_id=f"footfall-worker-{self.name}",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_poll_records=self.batch_size,
            max_partition_fetch_bytes=4 * 1024 * 1024,
            session_timeout_ms=SESSION_TIMEOUT_MS,
            heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
            max_poll_interval_ms=MAX_POLL_INTERVAL_MS,
        )

    async def _open(self) -> AIOKafkaConsumer:
        consumer = self._new_consumer()
        consumer.subscribe(self.topics, listener=self)
        try:
            await consumer.start()
        except BaseException:
            await consumer.stop()
            raise
        self._consumer = consumer
        return consumer

    async def start(self) -> None:
        if self._task is not None:
            return  # already started (a retried group start)
        await self._open()
        self._task = asyncio.create_task(self._supervise(), name=f"worker-consumer-{self.name}")
        log.info("worker_consumer_started", consumer=self.name, topics=self.topics, group=self.group)

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def assignment(self) -> set[TopicPartition]:
        return set(self._consumer.assignment()) if self._consumer is not None else set()

    async def stop(self, timeout: float = STOP_LOOP_SECONDS) -> None:
        """Finish (or abandon) the batch in hand, commit what was inserted, leave the group.
        Bounded: `timeout` for the loop, LEAVE_SECONDS for leaving the group (a broker gone
        mid-join would otherwise hold the stop for as long as aiokafka retries)."""
        self._stopping = True
        self._stopped.set()
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), timeout)
            except TimeoutError:
                log.warning("worker_consumer_stop_timeout", consumer=self.name, timeout=timeout)
                self._task.cancel()
                await asyncio.gather(self._task, return_exceptions=True)
            except Exception as exc:  # the loop ended with an error, which _supervise logged
                log.debug("worker_consumer_ended_with_error", consumer=self.name, error=str(exc)[:300])
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            await bounded(consumer.stop(), LEAVE_SECONDS, what=f"consumer {self.name} leaves its group")
        metrics.WORKER_ASSIGNED_PARTITIONS.labels(self.name).set(0)
        log.info("worker_consumer_stopped", consumer=self.name)

    # -- main loop ------------------------------------------------------------------------
    async def _supervise(self) -> None:
        """Run the loop; after an unexpected error start over from the committed offsets
        with a fresh consumer (never go on past records that were not stored)."""
        delay = 1.0
        while not self._stopping:
            try:
                if self._consumer is None:
                    await self._open()
                if self._consumer is None:
                    raise AssertionError("invariant: self._consumer is not None")
                await self._consume(self._consumer)
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.failed = exc
                log.error(
                    "worker_consumer_failed", consumer=self.name, error=str(exc)[:1000], restart_in=delay, exc_info=exc
                )
                self.buffer.take()  # uncommitted: they are fetched again after the restart
                if self._consumer is not None:
                    await self._consumer.stop()
                    self._consumer = None
                if await self._stopped.pause(delay):
                    return
                delay = min(delay * 2, 30.0)

    async def _consume(self, consumer: AIOKafkaConsumer) -> None:
        while not self._stopping:
            timeout_ms = max(int(self.buffer.wait_seconds() * 1000), 1)
            fetched = await consumer.getmany(timeout_ms=timeout_ms, max_records=max(self.buffer.room, 1))
            async with self._lock:
                for tp, records in fetched.items():
                    self._committed.setdefault(tp, records[0].offset)  # lag baseline until a commit
                    self.buffer.add(tp, records)
                if self.buffer.ready():
                    await self._flush()
            self.failed = None
            self._report_lag(consumer)
        async with self._lock:
            if len(self.buffer):
                await self._flush()

    async def _flush(self) -> None:
        """Process the buffered batch and, if it was stored, commit its offsets. Lock held."""
        pending = self.buffer.take()
        if not pending.records:
            return
        outcome = await self.processor.process(pending.records, lambda: self._stopping)
        if not outcome.done:
            return  # abandoned while stopping: nothing committed, the records come back
        await self._commit(pending.offsets)
        self.last_batch_at = time.time()

    async def _commit(self, offsets: dict[TopicPartition, int]) -> None:
        if self._consumer is None:
            raise AssertionError("invariant: self._consumer is not None")
        assigned = self._consumer.assignment()
        mine = {tp: off for tp, off in offsets.items() if tp in assigned}
        if len(mine) < len(offsets):
            # Partitions moved during the batch: the new owner re-reads them; the dedup
            # marks just written make it drop what this batch inserted.
            log.info(
                "commit_skipped_for_moved_partitions",
                consumer=self.name,
                partitions=sorted(tp.partition for tp in offsets.keys() - mine.keys()),
            )
        if not mine:
            return
        try:
            await self._consumer.commit(mine)
        except (CommitFailedError, IllegalStateError) as exc:
            metrics.WORKER_COMMIT_FAILURES.inc()
            log.warning("commit_failed", consumer=self.name, error=str(exc)[:500])
            return
        self._committed.update(mine)
        # Lag is reported at most once a second while polling; after a commit it changed,
        # so report it now and /metrics never shows a lag older than the last commit.
        self._report_lag(self._consumer, force=True)

    def _report_lag(self, consumer: AIOKafkaConsumer, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._lag_reported < LAG_REPORT_SECONDS:
            return
        self._lag_reported = now
        assigned = consumer.assignment()
        metrics.WORKER_ASSIGNED_PARTITIONS.labels(self.name).set(len(assigned))
        for tp in assigned:
            end = consumer.highwater(tp)
            done = self._committed.get(tp)
            if end is None or done is None:
                continue
            metrics.CONSUMER_LAG.labels(tp.topic, str(tp.partition)).set(max(end - done, 0))

    # -- rebalance listener (called by aiokafka's coordinator task) ----------------------
    async def on_partitions_revoked(self, revoked: Any) -> None:
        # Finish the batch in hand before the partitions go (waits for one in flight).
        async with self._lock:
            if len(self.buffer):
                try:
                    await self._flush()
                except KafkaError as exc:
                    log.warning("flush_before_rebalance_failed", consumer=self.name, error=str(exc)[:500])
        for tp in revoked:
            self._committed.pop(tp, None)
            with contextlib.suppress(KeyError):
                metrics.CONSUMER_LAG.remove(tp.topic, str(tp.partition))
        log.info("partitions_revoked", consumer=self.name, partitions=sorted(tp.partition for tp in revoked))

    async def on_partitions_assigned(self, assigned: Any) -> None:
        metrics.WORKER_ASSIGNED_PARTITIONS.labels(self.name).set(len(assigned))
        log.info("partitions_assigned", consumer=self.name, partitions=sorted(tp.partition for tp in assigned))
