"""The credential channel: `Directory` snapshots on a compacted Kafka topic.

The gateway never reads ClickHouse. Whoever owns the metadata (the embedded service,
a worker that holds the chDB store, `footfall directory publish`) writes the whole
snapshot (`Directory.to_dict()`: hashed lookups and scrypt hashes only, never a
secret) as one record under one key; compaction keeps the newest. A gateway reads the
topic from its start at boot, applies the newest snapshot, and keeps following it, so
a credential change reaches every running gateway within a poll. If Kafka is gone the
follower retries in the background and the gateway keeps serving with what it last
knew.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import structlog
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from footfall.shared import metrics
from footfall.shared.kafka.producers import start_durable_producer
from footfall.shared.metadata import Directory

log = structlog.get_logger(__name__)

SNAPSHOT_KEY = b"directory"
SNAPSHOT_VERSION = 1


class SnapshotError(ValueError):
    pass


def encode_snapshot(directory: Directory, published_ms: int) -> bytes:
    return orjson.dumps({"v": SNAPSHOT_VERSION, "published_ms": published_ms, "directory": directory.to_dict()})


def decode_snapshot(value: bytes | None) -> tuple[Directory, int]:
    if value is None:
        raise SnapshotError("tombstone")
    try:
        data = orjson.loads(value)
        if data.get("v") != SNAPSHOT_VERSION:
            raise SnapshotError(f"unknown snapshot version {data.get('v')!r}")
        return Directory.from_dict(data["directory"]), int(data["published_ms"])
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        raise SnapshotError(f"undecodable snapshot: {exc}") from None


class DirectoryPublisher:
    """Writes snapshots (acks=all). `publish` raises `KafkaError` when Kafka cannot take it."""

    def __init__(self, bootstrap: str, topic: str, *, timeout: float = 10.0) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.timeout = timeout
        self._producer: AIOKafkaProducer | None = None

    async def _ensure_producer(self) -> AIOKafkaProducer:
        if self._producer is None:
            producer = await start_durable_producer(
                self.bootstrap,
                client_id="footfall-directory",
                timeout=self.timeout,
                max_request_size=8 * 1024 * 1024,
            )
            self._producer = producer
        return self._producer

    async def publish(self, directory: Directory) -> None:
        producer = await self._ensure_producer()
        value = encode_snapshot(directory, int(time.time() * 1000))
        try:
            await asyncio.wait_for(producer.send_and_wait(self.topic, value, key=SNAPSHOT_KEY), self.timeout)
        except Exception:
            # Start the next attempt with a fresh (idempotent) producer.
            self._producer = None
            with contextlib.suppress(Exception):
                await asyncio.wait_for(producer.stop(), self.timeout)
            raise
        metrics.DIRECTORY_SNAPSHOTS.labels("published").inc()
        log.info(
            "directory_published",
            topic=self.topic,
            projects=len(directory.projects),
            accounts=len(directory.accounts),
            bytes=len(value),
        )

    async def stop(self) -> None:
        if self._producer is not None:
            await self._producer.stop()
            self._producer = None


class DirectoryRefresher:
    """A metadata owner's loop: load the directory, apply it locally, publish it when it
    changed (and every `republish_seconds` anyway, in case the topic was recreated).

    Without a publisher it is the reload loop of a process that reads the store (`footfall
    serve`, `footfall query`). `changed()` runs one refresh at once: the management interface
    calls it after each write, so a revocation holds in the writing process immediately and
    reaches the gateways with the publish, not only with the next tick. Refreshes are
    serialised, so a slow load started before a write can never be applied after a newer one.
    """

    def __init__(
        self,
        load: Callable[[], Awaitable[Directory]],
        apply: Callable[[Directory], None],
        publisher: DirectoryPublisher | None,
        *,
        interval: float = 5.0,
        republish_seconds: float = 300.0,
    ) -> None:
        self.load = load
        self.apply = apply
        self.publisher = publisher
        self.interval = interval
        self.republish_seconds = republish_seconds
        self._published: dict[str, Any] | None = None
        self._published_at = 0.0
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    async def refresh(self) -> None:
        async with self._lock:
            directory = await self.load()
            self.apply(directory)
            if self.publisher is None:
                return
            content = directory.to_dict()
            stale = time.monotonic() - self._published_at > self.republish_seconds
            if content != self._published or stale:
                await self.publisher.publish(directory)
                self._published = content
                self._published_at = time.monotonic()

    async def changed(self) -> None:
        """Refresh now, after a metadata write. A failure is logged, not raised: the write is
        done, and the loop retries within `interval` seconds."""
        try:
            await self.refresh()
        except Exception as exc:
            log.warning("directory_refresh_failed", error=str(exc)[:500])

    async def start(self) -> None:
        try:
            await self.refresh()
        except Exception as exc:  # Kafka or the warehouse not there yet: the loop retries
            log.warning("directory_refresh_failed", error=str(exc)[:500])
        self._task = asyncio.create_task(self._loop(), name="directory-refresher")

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.refresh()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("directory_refresh_failed", error=str(exc)[:500])

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        if self.publisher is not None:
            await self.publisher.stop()


class DirectoryFollower:
    """Applies the newest snapshot of the topic, then every later one, until stopped."""

    def __init__(
        self, bootstrap: str, topic: str, apply: Callable[[Directory], None], *, retry_seconds: float = 2.0
    ) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.apply = apply
        self.retry_seconds = retry_seconds
        self.loaded = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self, wait: float = 10.0) -> bool:
        """Start following; wait up to `wait` s for the first snapshot. True if one arrived."""
        self._task = asyncio.create_task(self._run(), name="directory-follower")
        try:
            await asyncio.wait_for(self.loaded.wait(), wait)
        except TimeoutError:
            log.warning("directory_not_loaded_yet", topic=self.topic, waited_seconds=wait)
            return False
        return True

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def _apply(self, value: bytes | None, offset: int) -> None:
        try:
            directory, published_ms = decode_snapshot(value)
        except SnapshotError as exc:
            log.error("directory_snapshot_skipped", offset=offset, error=str(exc))
            return
        self.apply(directory)
        self.loaded.set()
        metrics.DIRECTORY_SNAPSHOTS.labels("applied").inc()
        metrics.DIRECTORY_PUBLISHED_AT.set(published_ms / 1000)
        log.info("directory_applied", offset=offset, projects=len(directory.projects), published_ms=published_ms)

    async def _run(self) -> None:
        while True:
            consumer = AIOKafkaConsumer(
                bootstrap_servers=self.bootstrap,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                max_partition_fetch_bytes=16 * 1024 * 1024,
                fetch_max_bytes=64 * 1024 * 1024,
            )
            try:
                await consumer.start()
                await self._follow(consumer)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the broker went away: keep the last snapshot, retry
                log.warning("directory_follow_failed", topic=self.topic, error=str(exc)[:500])
                await asyncio.sleep(self.retry_seconds)
            finally:
                await consumer.stop()

    async def _follow(self, consumer: AIOKafkaConsumer) -> None:
        tp = TopicPartition(self.topic, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        end = (await consumer.end_offsets([tp]))[tp]
        # Catch up to the end as it was at start, applying only the newest snapshot.
        newest: tuple[bytes | None, int] | None = None
        while await consumer.position(tp) < end:
            batch = await consumer.getmany(tp, timeout_ms=1000)
            for record in batch.get(tp, []):
                newest = (record.value, record.offset)
        if newest is not None:
            self._apply(*newest)
        while True:
            batch = await consumer.getmany(tp, timeout_ms=1000)
            records = batch.get(tp, [])
            if records:
                self._apply(records[-1].value, records[-1].offset)


__all__ = [
    "DirectoryFollower",
    "DirectoryPublisher",
    "DirectoryRefresher",
    "SnapshotError",
    "decode_snapshot",
    "encode_snapshot",
]
