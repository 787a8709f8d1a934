"""Topic names (with the configurable prefix) and their creation.

Each stream has its topic `<name>.raw` (`events.raw`, …), keyed by the stream's partition
key (for events `project_id:distinct_id`), so one user's items stay in order on one
partition and every retry lands on the partition that saw the original (which is what
lets a worker's Redis lookup see it). `footfall.dlq` keeps what a worker could not
decode, with the reason and source topic in headers. `footfall.directory` is compacted:
its last record is the current credential snapshot.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Any

import structlog
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError, TopicAlreadyExistsError

from footfall.shared.streams import STREAMS, Stream

log = structlog.get_logger(__name__)

RAW_PARTITIONS = 12  # the most worker consumers that can share the load
DLQ_PARTITIONS = 1
# Keep the raw stream long enough to replay a day of a ClickHouse outage.
RAW_CONFIG = {"retention.ms": str(7 * 24 * 3600 * 1000)}
DLQ_CONFIG = {"retention.ms": str(30 * 24 * 3600 * 1000)}
# Compaction keeps the last snapshot; small segments let the old ones go soon.
DIRECTORY_CONFIG = {
    "cleanup.policy": "compact",
    "segment.ms": str(3600 * 1000),
    "min.cleanable.dirty.ratio": "0.1",
    "max.message.bytes": str(8 * 1024 * 1024),
}


@dataclass(frozen=True)
class Topics:
    prefix: str
    dlq: str
    directory: str
    workers_group: str

    @classmethod
    def for_prefix(cls, prefix: str) -> Topics:
        return cls(
            prefix=prefix,
            dlq=f"{prefix}footfall.dlq",
            directory=f"{prefix}footfall.directory",
            workers_group=f"{prefix}footfall-workers",
        )

    def of(self, stream: Stream[Any]) -> str:
        """The topic of a stream's items."""
        return f"{self.prefix}{stream.name}.raw"

    @property
    def streams(self) -> dict[str, Stream[Any]]:
        """Every stream by its topic (what workers subscribe to)."""
        return {self.of(stream): stream for stream in STREAMS}


async def ensure_topics(bootstrap: str, topics: Topics, *, timeout_ms: int = 15000) -> None:
    """Create the topics (every stream's, the dead letters, the directory) if missing
    (idempotent; an existing topic is left as it is).

    Replication is 3, or the number of brokers when there are fewer (one in development).

    Raises `KafkaError` if the broker cannot be reached: callers decide whether that is
    fatal (a worker starting) or retried later (a gateway serving 503 meanwhile).
    """
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=timeout_ms)
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        cluster = await admin.describe_cluster()
        replicas = max(1, min(3, len(cluster.get("brokers", [])) or 1))
        wanted = [
            *(NewTopic(topic, RAW_PARTITIONS, replicas, topic_configs=RAW_CONFIG) for topic in topics.streams),
            NewTopic(topics.dlq, DLQ_PARTITIONS, replicas, topic_configs=DLQ_CONFIG),
            NewTopic(topics.directory, 1, replicas, topic_configs=DIRECTORY_CONFIG),
        ]
        created = []
        for topic in wanted:
            if topic.name in existing:
                continue
            # One at a time: a concurrent creator (another replica) makes one fail, not all.
            with contextlib.suppress(TopicAlreadyExistsError):
                response = await admin.create_topics([topic])
                _raise_topic_errors(response)
                created.append(topic.name)
                log.info("kafka_topic_created", topic=topic.name, partitions=topic.num_partitions)
        # Creation is asynchronous on the broker: wait until the metadata shows the topics,
        # so that the first producer or consumer does not log "topic not found".
        for _ in range(50):
            if not created or set(created) <= set(await admin.list_topics()):
                break
            await asyncio.sleep(0.1)
    finally:
        await admin.close()


def _raise_topic_errors(response: object) -> None:
    # aiokafka returns per-topic error codes instead of raising; 36 = TOPIC_ALREADY_EXISTS.
    for entry in getattr(response, "topic_errors", []) or []:
        name, code = entry[0], entry[1]
        if code == 36:
            continue
        if code:
            raise KafkaError(f"creating topic {name} failed with error code {code}")
