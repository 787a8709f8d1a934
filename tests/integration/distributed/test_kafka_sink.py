"""KafkaSink against a real broker (and against none): what lands in events.raw, and the
503 paths."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.partitioner import DefaultPartitioner

from footfall.services.gateway import kafka_sink
from footfall.services.gateway.kafka_sink import KafkaSink
from footfall.shared.config import KafkaSettings
from footfall.shared.errors import UnavailableError
from footfall.shared.events import Event
from footfall.shared.kafka import Topics, accepted_ms_of
from footfall.shared.streams import EVENTS
from footfall.shared.streams.events import decode_event
from tests.distributed import free_port


def events(n: int) -> list[Event]:
    now = int(time.time() * 1000)
    return [Event(1, "E", now - i, f"user-{i % 7}", f"ins-{i}", {"i": i}, ip=None) for i in range(n)]


@pytest.mark.kafka
def test_published_records_carry_key_partition_headers_and_the_event(kafka_bootstrap: str) -> None:
    prefix = f"s{uuid.uuid4().hex[:8]}."
    settings = KafkaSettings(bootstrap=kafka_bootstrap, topic_prefix=prefix)
    sent = events(300)

    async def go() -> list:  # type: ignore[type-arg]
        sink = KafkaSink(settings)
        await sink.start()
        try:
            await sink.publish(EVENTS, sent)
        finally:
            await sink.stop()
        consumer = AIOKafkaConsumer(
            Topics.for_prefix(prefix).of(EVENTS), bootstrap_servers=kafka_bootstrap, auto_offset_reset="earliest"
        )
        await consumer.start()
        try:
            got: list = []  # type: ignore[type-arg]
            deadline = time.monotonic() + 20
            while len(got) < len(sent) and time.monotonic() < deadline:
                batch = await consumer.getmany(timeout_ms=1000)
                got.extend(r for records in batch.values() for r in records)
            partitions = sorted(consumer.partitions_for_topic(Topics.for_prefix(prefix).of(EVENTS)) or [])
            return [got, partitions]
        finally:
            await consumer.stop()

    records, partitions = asyncio.run(go())
    assert sorted((decode_event(r.value) for r in records), key=lambda e: e.insert_id) == sorted(
        sent, key=lambda e: e.insert_id
    )
    java_default = DefaultPartitioner()
    for r in records:
        assert r.key == f"1:{decode_event(r.value).distinct_id}".encode()
        assert r.partition == java_default(r.key, partitions, partitions)  # murmur2, like the Java client
        assert accepted_ms_of(r.headers) > 0


@pytest.mark.kafka  # no broker is needed, but it opens (refused) connections
def test_unreachable_broker_is_a_quick_503_and_reconnects_are_throttled() -> None:
    settings = KafkaSettings(bootstrap=f"127.0.0.1:{free_port()}", publish_timeout=2.0)

    async def go() -> tuple[float, float]:
        sink = KafkaSink(settings)
        await sink.start()  # does not raise: the gateway serves 503s until Kafka is there
        started = time.monotonic()
        with pytest.raises(UnavailableError):
            await sink.publish(EVENTS, events(1))
        first = time.monotonic() - started
        started = time.monotonic()
        with pytest.raises(UnavailableError):
            await sink.publish(EVENTS, events(1))
        await sink.stop()
        return first, time.monotonic() - started

    first, second = asyncio.run(go())
    assert first < 3.0
    assert second < 0.1, "within the reconnect window a request is refused without a new attempt"


@pytest.mark.kafka
def test_overload_is_refused_at_once(kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafka_sink, "MAX_INFLIGHT_ITEMS", 10)
    settings = KafkaSettings(bootstrap=kafka_bootstrap, topic_prefix=f"o{uuid.uuid4().hex[:8]}.")

    async def go() -> None:
        sink = KafkaSink(settings)
        await sink.start()
        try:
            await sink.publish(EVENTS, events(10))
            with pytest.raises(UnavailableError) as info:
                await sink.publish(EVENTS, events(11))
            assert info.value.retry_after == 1
        finally:
            await sink.stop()

    asyncio.run(go())
