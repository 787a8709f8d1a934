"""KafkaSink's failure decisions with a fake producer (no broker): a request whose batch times
out fails alone while the producer and the other requests carry on; a broker that is really
gone (no acks, no metadata), a refused batch or a dead sender still make the sink `down`, so
later requests get an immediate 503."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest
from aiokafka.errors import KafkaConnectionError, KafkaTimeoutError, OutOfOrderSequenceNumber

from footfall.services.gateway import kafka_sink
from footfall.services.gateway.kafka_sink import KafkaSink
from footfall.shared.config import KafkaSettings
from footfall.shared.errors import UnavailableError
from footfall.shared.events import Event
from footfall.shared.streams import EVENTS

TIMEOUT = 1.0  # the publish timeout of these tests


class FakeBatch:
    def __init__(self) -> None:
        self.values: list[bytes] = []

    def append(self, *, key: bytes, value: bytes, timestamp: Any, headers: Any) -> object:
        self.values.append(value)
        return object()

    def close(self) -> None:
        pass


class FakeClient:
    def __init__(self, producer: FakeProducer) -> None:
        self.producer = producer

    async def fetch_all_metadata(self) -> object:
        self.producer.probes += 1
        if self.producer.metadata_hangs:
            await asyncio.sleep(3600)
        return object()


class FakeSender:
    def __init__(self) -> None:
        self.sender_task: asyncio.Future[None] = asyncio.get_running_loop().create_future()


class FakeProducer:
    """Queues a batch in 30 ms (so concurrent requests are mid-submit together) and
    acknowledges it after `ack_delay`, except where `decide(batch)` says otherwise:
    "hang" (never acknowledged), "queue_timeout" (send_batch raises KafkaTimeoutError, as
    aiokafka does when the partition's previous batch was not drained in time) or an exception
    to fail the batch's future with."""

    def __init__(self, decide: Callable[[FakeBatch], object] = lambda b: None, ack_delay: float = 0.02) -> None:
        self.decide = decide
        self.ack_delay = ack_delay
        self.metadata_hangs = False
        self.probes = 0
        self.stopped = False
        self.client = FakeClient(self)
        self._sender = FakeSender()
        self.fatal: BaseException | None = None

    def create_batch(self) -> FakeBatch:
        return FakeBatch()

    async def partitions_for(self, topic: str) -> set[int]:
        return {0, 1, 2}

    async def send_batch(self, batch: FakeBatch, topic: str, partition: int) -> asyncio.Future[object]:
        await asyncio.sleep(0.03)  # queuing behind the partition's previous batch
        if self.stopped:
            from aiokafka.errors import ProducerClosed

            raise ProducerClosed()
        if self.fatal is not None:
            raise self.fatal
        verdict = self.decide(batch)
        if verdict == "queue_timeout":
            raise KafkaTimeoutError()
        future: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        if verdict == "hang":
            return future
        loop = asyncio.get_running_loop()
        if isinstance(verdict, BaseException):
            loop.call_later(self.ack_delay, future.set_exception, verdict)
        else:
            loop.call_later(self.ack_delay, future.set_result, object())
        return future

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        self.stopped = True


def events(n: int, tag: str) -> list[Event]:
    now = int(time.time() * 1000)
    return [Event(1, "E", now - i, f"user-{i % 5}", f"{tag}-{i}", {"i": i}, ip=None) for i in range(n)]


def is_request(tag: str) -> Callable[[FakeBatch], bool]:
    return lambda batch: any(f'"i":"{tag}-'.encode() in v for v in batch.values)


def fake_sink(monkeypatch: pytest.MonkeyPatch, producers: list[Any]) -> tuple[KafkaSink, list[Any]]:
    """A sink whose n-th connection attempt gets producers[n] (an exception: the attempt fails)."""
    made: list[Any] = []
    monkeypatch.setattr(kafka_sink, "LIVENESS_SECONDS", 0.2)
    monkeypatch.setattr(kafka_sink, "LIVENESS_TIMEOUT", 0.3)
    monkeypatch.setattr(kafka_sink, "RECONNECT_SECONDS", 0.1)
    sink = KafkaSink(KafkaSettings(bootstrap="fake:9092", topic_prefix="t.", publish_timeout=TIMEOUT))

    def new_producer() -> Any:
        made.append(producers[min(len(made), len(producers) - 1)])
        return made[-1]

    async def open_(producer: Any) -> None:
        if isinstance(producer, BaseException):
            raise producer
        sink._partitions[sink.topics.of(EVENTS)] = [0, 1, 2]

    async def close(producer: Any) -> None:
        if not isinstance(producer, BaseException):
            await producer.stop()

    monkeypatch.setattr(sink, "_new_producer", new_producer)
    monkeypatch.setattr(sink, "_open", open_)
    monkeypatch.setattr(sink, "_close", close)
    return sink, made


async def outcome(sink: KafkaSink, tag: str) -> str:
    try:
        await sink.publish(EVENTS, events(40, tag))
    except UnavailableError:
        return "503"
    return "200"


@pytest.mark.parametrize("failure", ["queue_timeout", "hang"])
def test_one_request_timing_out_fails_alone(monkeypatch: pytest.MonkeyPatch, failure: str) -> None:
    async def go() -> tuple[list[str], list[str], str, int, int]:
        slow = is_request("slow")
        producer = FakeProducer(lambda b: failure if slow(b) else None)
        sink, made = fake_sink(monkeypatch, [producer])
        await sink.start()
        try:
            first = await asyncio.gather(*(outcome(sink, t) for t in ["a", "slow", "b", "c", "d"]))
            # The liveness check ran (after the timeout) and found the broker answering:
            # the same producer keeps serving.
            await asyncio.sleep(1.0)
            later = await asyncio.gather(*(outcome(sink, t) for t in ["e", "f"]))
            return first, later, sink.state, len(made), int(producer.stopped)
        finally:
            await sink.stop()

    first, later, state, producers, stopped = asyncio.run(go())
    assert first == ["200", "503", "200", "200", "200"]
    assert later == ["200", "200"]
    assert (state, producers, stopped) == ("up", 1, 0)


def test_a_broker_that_is_gone_still_fails_fast(monkeypatch: pytest.MonkeyPatch) -> None:
    async def go() -> tuple[list[str], str, float]:
        producer = FakeProducer(lambda b: "hang")
        producer.metadata_hangs = True
        sink, _ = fake_sink(monkeypatch, [producer, KafkaConnectionError("refused")])
        await sink.start()
        try:
            first = await asyncio.gather(*(outcome(sink, t) for t in ["a", "b"]))
            # The timeout woke the liveness check; it gets no answer within LIVENESS_TIMEOUT.
            await asyncio.sleep(1.0)
            started = time.monotonic()
            with pytest.raises(UnavailableError) as info:
                await sink.publish(EVENTS, events(5, "c"))
            assert info.value.retry_after == kafka_sink.DOWN_RETRY_AFTER
            return first, sink.state, time.monotonic() - started
        finally:
            await sink.stop()

    first, state, refused_in = asyncio.run(go())
    assert first == ["503", "503"]
    assert state == "down"
    assert refused_in < 0.1


def test_a_refused_batch_replaces_the_producer(monkeypatch: pytest.MonkeyPatch) -> None:
    async def go() -> tuple[list[str], bool, str, int]:
        bad = is_request("bad")
        broken = FakeProducer(lambda b: OutOfOrderSequenceNumber() if bad(b) else None)
        fresh = FakeProducer()
        sink, made = fake_sink(monkeypatch, [broken, fresh])
        await sink.start()
        try:
            first = await asyncio.gather(*(outcome(sink, t) for t in ["bad", "a"]))
            await asyncio.sleep(1.0)  # the background task connects the fresh producer
            return first, broken.stopped, await outcome(sink, "b"), len(made)
        finally:
            await sink.stop()

    first, replaced, later, producers = asyncio.run(go())
    assert first[0] == "503"
    assert replaced, "a producer whose batch was refused is not used again"
    assert (later, producers) == ("200", 2)


def test_a_dead_sender_is_noticed_without_traffic(monkeypatch: pytest.MonkeyPatch) -> None:
    async def go() -> tuple[str, bool, int]:
        broken = FakeProducer()
        sink, made = fake_sink(monkeypatch, [broken, FakeProducer()])
        await sink.start()
        try:
            assert await outcome(sink, "a") == "200"
            broken.fatal = OutOfOrderSequenceNumber()
            broken._sender.sender_task.set_exception(broken.fatal)
            await asyncio.sleep(1.0)
            return await outcome(sink, "b"), broken.stopped, len(made)
        finally:
            await sink.stop()

    later, stopped, producers = asyncio.run(go())
    assert (later, stopped, producers) == ("200", True, 2)
