"""The service fixtures of tests/services.py give a working Kafka and Redis.

Kafka: admin create, produce with acks=all, consume in a consumer group,
commit, and a second member of the group resumes after the committed offset;
the broker keeps topics and committed offsets across a stop/start.
Redis: SET/GET with expiry, a transactional pipeline, and a stop/start.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from tests.services import kafka_metadata_ok, start_kafka, start_redis, stop_kafka, stop_redis

TIMEOUT = 60.0


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


async def _create_topic(bootstrap: str, topic: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    finally:
        await admin.close()


async def _produce(bootstrap: str, topic: str, values: list[bytes]) -> list[int]:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)
    await producer.start()
    try:
        offsets = []
        for i, value in enumerate(values):
            meta = await producer.send_and_wait(topic, value, key=f"k{i}".encode())
            offsets.append(meta.offset)
        return offsets
    finally:
        await producer.stop()


async def _consume(
    bootstrap: str, topic: str, group: str, n: int, commit: bool = True
) -> tuple[list[bytes], int | None]:
    """Read n messages as a member of `group`; commit; return values and the committed offset."""
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        values = []
        for _ in range(n):
            msg = await consumer.getone()
            values.append(msg.value)
        if commit:
            await consumer.commit()
        return values, await consumer.committed(TopicPartition(topic, 0))
    finally:
        await consumer.stop()


def _run(coro):
    async def bounded():
        return await asyncio.wait_for(coro, TIMEOUT)

    return asyncio.run(bounded())


@pytest.mark.kafka
def test_kafka_produce_consume_commit(kafka_bootstrap: str) -> None:
    topic, group = _name("t-local-services"), _name("g-local-services")

    async def scenario() -> None:
        await _create_topic(kafka_bootstrap, topic)
        offsets = await _produce(kafka_bootstrap, topic, [b"a", b"b", b"c"])
        assert offsets == [0, 1, 2]

        values, committed = await _consume(kafka_bootstrap, topic, group, 2)
        assert values == [b"a", b"b"]
        assert committed == 2

        # Another member of the same group starts after the committed offset.
        values, committed = await _consume(kafka_bootstrap, topic, group, 1)
        assert values == [b"c"]
        assert committed == 3

    _run(scenario())


@pytest.mark.kafka
def test_kafka_restart_keeps_topics_and_offsets(kafka_bootstrap: str) -> None:
    topic, group = _name("t-restart"), _name("g-restart")

    async def before() -> None:
        # Auto-created topic (num.partitions=4 by default): key-partitioned.
        await _produce(kafka_bootstrap, topic, [b"x"])
        await _create_topic(kafka_bootstrap, topic + "-1p")
        await _produce(kafka_bootstrap, topic + "-1p", [b"1", b"2"])
        values, committed = await _consume(kafka_bootstrap, topic + "-1p", group, 1)
        assert values == [b"1"] and committed == 1

    async def after() -> None:
        values, committed = await _consume(kafka_bootstrap, topic + "-1p", group, 1)
        assert values == [b"2"] and committed == 2
        offsets = await _produce(kafka_bootstrap, topic + "-1p", [b"3"])
        assert offsets == [2]
        producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
        await producer.start()
        try:  # the auto-created topic survived, with the default 4 partitions
            assert await producer.partitions_for(topic) == {0, 1, 2, 3}
        finally:
            await producer.stop()

    _run(before())
    stop_kafka()
    try:
        assert not kafka_metadata_ok(kafka_bootstrap)
    finally:
        assert start_kafka() == kafka_bootstrap
    _run(after())


@pytest.mark.redis
def test_redis_set_get_pipeline(redis_url: str) -> None:
    import redis.asyncio as aioredis

    prefix = _name("test")

    async def scenario() -> None:
        r = aioredis.from_url(redis_url)
        try:
            assert await r.ping()
            assert await r.set(f"{prefix}:a", "1", ex=60, nx=True)
            assert not await r.set(f"{prefix}:a", "2", ex=60, nx=True)  # NX: first writer wins
            assert await r.get(f"{prefix}:a") == b"1"
            assert 0 < await r.ttl(f"{prefix}:a") <= 60

            async with r.pipeline(transaction=True) as pipe:
                for i in range(100):
                    pipe.set(f"{prefix}:k{i}", i, ex=60)
                pipe.incrby(f"{prefix}:n", 5)
                pipe.get(f"{prefix}:k42")
                results = await pipe.execute()
            assert results[:100] == [True] * 100
            assert results[100:] == [5, b"42"]
        finally:
            await r.aclose()

    _run(scenario())


@pytest.mark.redis
def test_redis_restart_comes_back_empty(redis_url: str) -> None:
    import redis
    import redis.asyncio as aioredis

    key = _name("test-restart")

    async def write() -> None:
        r = aioredis.from_url(redis_url)
        try:
            await r.set(key, "v", ex=60)
        finally:
            await r.aclose()

    async def read() -> bytes | None:
        r = aioredis.from_url(redis_url)
        try:
            return await r.get(key)
        finally:
            await r.aclose()

    _run(write())
    stop_redis()
    try:
        with pytest.raises(redis.ConnectionError):
            _run(read())
    finally:
        assert start_redis() == redis_url
    assert _run(read()) is None
