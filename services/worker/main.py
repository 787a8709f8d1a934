"""Composition root of `footfall worker`: N consumers of the group in one process, their
shared dedup store, dead-letter producer and warehouse, and a small HTTP app (`/healthz`,
`/metrics`). A worker only ingests: where chDB is the store (only one process may open
it) and queries are wanted too, run `footfall serve` with `FOOTFALL_KAFKA_BOOTSTRAP`,
which hosts the consumers beside every interface. No logic lives here.

The worker also owns the metadata it can read: it publishes the credential snapshot to
the directory topic (on start, on change, and every few minutes) so that gateways,
which never read ClickHouse, learn about new and revoked credentials.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import orjson
import structlog
from aiokafka import TopicPartition
from aiokafka.errors import KafkaError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response

from footfall.services.worker.consumer import WorkerConsumer
from footfall.services.worker.dedup import DedupStore, MemoryDedup, RedisDedup
from footfall.services.worker.dlq import KafkaDeadLetters
from footfall.services.worker.enrich import Enricher, open_enricher
from footfall.services.worker.pipeline import BatchProcessor
from footfall.services.worker.settings import WorkerSettings
from footfall.shared.auth import Authenticator
from footfall.shared.events import fast_import
from footfall.shared.events.fast_records import FastRecords
from footfall.shared.kafka import Topics, ensure_topics
from footfall.shared.kafka.directory import DirectoryPublisher, DirectoryRefresher
from footfall.shared.kafka.logs import quiet_aiokafka
from footfall.shared.lifecycle import Services, bounded
from footfall.shared.metadata import Directory, MetadataRepository
from footfall.shared.schema import apply_migrations, hot
from footfall.shared.warehouse import ClickHouseWarehouse, Warehouse, open_warehouse
from footfall.shared.web import Background, build_starlette

log = structlog.get_logger(__name__)

KAFKA_START_SECONDS = 60.0


def open_dedup(settings: WorkerSettings) -> DedupStore:
    if not settings.redis_url:
        log.warning("redis_dedup_disabled", reason="FOOTFALL_REDIS_URL is not set: in-process dedup memory only")
        return MemoryDedup(settings.dedup_ttl_seconds)
    # The topic prefix namespaces the keys, so deployments can share one Redis.
    return RedisDedup(settings.redis_url, settings.dedup_ttl_seconds, prefix=settings.kafka.topic_prefix.encode())


async def wait_for_topics(bootstrap: str, topics: Topics, patience: float = KAFKA_START_SECONDS) -> None:
    """Create the topics, waiting up to `patience` s for the broker (it may start after us)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + patience
    while True:
        try:
            await ensure_topics(bootstrap, topics)
            return
        except (KafkaError, OSError) as exc:
            if loop.time() >= deadline:
                raise
            log.warning("kafka_not_ready", bootstrap=bootstrap, error=str(exc)[:300])
            await asyncio.sleep(2.0)


@dataclass
class WorkerGroup:
    """The consumers of one process and what they share."""

    settings: WorkerSettings
    topics: Topics
    consumers: list[WorkerConsumer]
    dedup: DedupStore
    dead_letters: KafkaDeadLetters
    started: bool = field(default=False)

    async def start(self) -> None:
        await wait_for_topics(self.settings.kafka.bootstrap, self.topics)
        # Together, so the group settles in one rebalance rather than one per consumer.
        await asyncio.gather(*(c.start() for c in self.consumers))
        self.started = True

    async def stop(self) -> None:
        """Bounded (about 2 s): the consumers stop together, then what they shared closes."""
        await asyncio.gather(*(c.stop() for c in self.consumers), return_exceptions=True)
        await bounded(self.dead_letters.close(), 0.4, what="close the dead-letter producer")
        await bounded(self.dedup.close(), 0.3, what="close the dedup store")

    def health(self) -> tuple[bool, dict[str, Any]]:
        consumers = [
            {
                "name": c.name,
                "running": c.running,
                # Per topic: every stream's topic has its own partitions 0..n-1.
                "partitions": partitions_by_topic(c.assignment()),
                "last_batch_at": c.last_batch_at,
                "error": str(c.failed)[:300] if c.failed else None,
            }
            for c in self.consumers
        ]
        redis = (
            "memory"
            if isinstance(self.dedup, MemoryDedup)
            else ("ok" if getattr(self.dedup, "available", True) else "bypassed")
        )
        ok = self.started and all(c["running"] for c in consumers)
        return ok, {"status": "ok" if ok else "unavailable", "consumers": consumers, "dedup": redis}


def partitions_by_topic(assignment: set[TopicPartition]) -> dict[str, list[int]]:
    by_topic: dict[str, list[int]] = {}
    for tp in assignment:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return {topic: sorted(parts) for topic, parts in sorted(by_topic.items())}


def build_worker_group(
    settings: WorkerSettings, warehouse: Warehouse, enricher: Enricher, *, consumers: int, topics: Topics | None = None
) -> WorkerGroup:
    topics = topics or Topics.for_prefix(settings.kafka.topic_prefix)
    dedup = open_dedup(settings)
    dead_letters = KafkaDeadLetters(settings.kafka.bootstrap, topics.dlq, timeout=settings.kafka.publish_timeout)
    # Event records decoded and stored by the Rust extension (hot columns as `serve` fills them;
    # none in a worker process of its own, whose engine computes them).
    fast = (
        FastRecords(geo=enricher.reader is not None, hot_columns=hot.in_use_columns)
        if fast_import.usable(settings.fast_path)
        else None
    )
    processor = BatchProcessor(topics.streams, warehouse, enricher, dedup, dead_letters, fast=fast)
    members = [
        WorkerConsumer(
            str(i),
            bootstrap=settings.kafka.bootstrap,
            topics=list(topics.streams),
            group=topics.workers_group,
            processor=processor,
            batch_size=settings.batch_size,
            batch_seconds=settings.batch_seconds,
        )
        for i in range(max(consumers, 1))
    ]
    return WorkerGroup(settings, topics, members, dedup, dead_letters)


def build_directory_refresher(
    settings: WorkerSettings, warehouse: Warehouse, authenticator: Authenticator, topics: Topics
) -> DirectoryRefresher:
    repo = MetadataRepository(warehouse)

    async def load() -> Directory:
        return await warehouse.run(repo.load_directory)

    publisher = TopicsFirstPublisher(settings.kafka.bootstrap, topics, timeout=settings.kafka.publish_timeout)
    return DirectoryRefresher(load, authenticator.replace, publisher)


class TopicsFirstPublisher(DirectoryPublisher):
    """Creates the topics before its first snapshot. The process's parts start concurrently
    (footfall.shared.lifecycle): a snapshot sent before the compacted directory topic exists
    would have the broker auto-create an ordinary one, which gateways may never read."""

    def __init__(self, bootstrap: str, topics: Topics, *, timeout: float) -> None:
        super().__init__(bootstrap, topics.directory, timeout=timeout)
        self._topics: Topics | None = topics

    async def publish(self, directory: Directory) -> None:
        if self._topics is not None:
            await ensure_topics(self.bootstrap, self._topics, timeout_ms=int(self.timeout * 1000))
            self._topics = None
        await super().publish(directory)


def in_process_workers(
    settings: WorkerSettings, warehouse: Warehouse, enricher: Enricher, authenticator: Authenticator
) -> list[Background]:
    """For `footfall serve` with Kafka: the directory publisher, then the consumers."""
    quiet_aiokafka()
    topics = Topics.for_prefix(settings.kafka.topic_prefix)
    refresher = build_directory_refresher(settings, warehouse, authenticator, topics)
    group = build_worker_group(settings, warehouse, enricher, consumers=settings.consumers, topics=topics)
    return [refresher, group]


@dataclass
class Worker:
    app: Starlette
    group: WorkerGroup
    warehouse: ClickHouseWarehouse


def build_worker(settings: WorkerSettings, *, consumers: int) -> Worker:
    if not settings.kafka.bootstrap:
        raise SystemExit("footfall worker needs FOOTFALL_KAFKA_BOOTSTRAP (host:port of a Kafka broker)")
    quiet_aiokafka()
    if settings.store.warehouse_dsn == "":
        settings.store.make_data_dir()
    warehouse = open_warehouse(settings.store.dsn)
    apply_migrations(warehouse)
    enricher = open_enricher(settings.geoip_db)
    topics = Topics.for_prefix(settings.kafka.topic_prefix)
    group = build_worker_group(settings, warehouse, enricher, consumers=consumers, topics=topics)
    authenticator = Authenticator(Directory())
    refresher = build_directory_refresher(settings, warehouse, authenticator, topics)

    # Started in the background: /healthz and /metrics answer at once, and SIGTERM is
    # honoured in every state (footfall.shared.lifecycle).
    services = Services(directory=refresher, consumers=group)

    async def healthz(request: Request) -> Response:
        ok, body = group.health()
        body["services"] = services.health()
        return Response(orjson.dumps(body), status_code=200 if ok else 503, media_type="application/json")

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await services.start()
        try:
            yield
        finally:
            await services.stop()
            enricher.close()
            warehouse.close()

    app = build_starlette("worker", [], lifespan=lifespan, health=healthz)
    return Worker(app, group, warehouse)
