"""Dead letters: records a worker cannot turn into an event go to `events.dlq`, with the
reason, and the partition moves on. They are sent (and acknowledged) before the batch's
offsets are committed, so a dead letter is never lost either.

Each dead letter keeps the original key and value; headers say why and where from:
`reason` (short label), `error` (message), `source_topic`, `source_partition`,
`source_offset`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Protocol

import structlog
from aiokafka import AIOKafkaProducer

from footfall.shared import metrics
from footfall.shared.kafka.producers import start_durable_producer

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class DeadLetter:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    reason: str
    error: str

    def headers(self) -> list[tuple[str, bytes]]:
        return [
            ("reason", self.reason.encode()),
            ("error", self.error.encode("utf-8", "replace")[:1000]),
            ("source_topic", self.topic.encode()),
            ("source_partition", str(self.partition).encode()),
            ("source_offset", str(self.offset).encode()),
        ]


class DeadLetterSink(Protocol):
    async def send(self, letters: list[DeadLetter]) -> None: ...

    async def close(self) -> None: ...


class MemoryDeadLetters:
    def __init__(self) -> None:
        self.letters: list[DeadLetter] = []

    async def send(self, letters: list[DeadLetter]) -> None:
        self.letters.extend(letters)
        for letter in letters:
            metrics.DEAD_LETTERED.labels(letter.reason).inc()

    async def close(self) -> None:
        return None


class KafkaDeadLetters:
    """Publishes to the dead-letter topic; `send` raises `KafkaError` unless all were acked."""

    def __init__(self, bootstrap: str, topic: str, *, timeout: float = 10.0) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.timeout = timeout
        self._producer: AIOKafkaProducer | None = None
        self._lock = asyncio.Lock()

    async def _ensure(self) -> AIOKafkaProducer:
        async with self._lock:
            if self._producer is None:
                producer = await start_durable_producer(
                    self.bootstrap,
                    client_id="footfall-worker-dlq",
                    timeout=self.timeout,
                    max_request_size=2 * 1024 * 1024,
                )
                self._producer = producer
            return self._producer

    async def send(self, letters: list[DeadLetter]) -> None:
        if not letters:
            return
        producer = await self._ensure()
        try:
            futures = [
                await producer.send(self.topic, letter.value, key=letter.key, headers=letter.headers())
                for letter in letters
            ]
            await asyncio.wait_for(asyncio.gather(*futures), self.timeout)
        except Exception:
            # A fresh producer for the retry: an idempotent one whose batches expired
            # would fail every later send (OutOfOrderSequenceNumber).
            await self._reset(producer)
            raise
        for letter in letters:
            metrics.DEAD_LETTERED.labels(letter.reason).inc()
            log.warning(
                "message_dead_lettered",
                reason=letter.reason,
                error=letter.error[:300],
                source=f"{letter.topic}/{letter.partition}@{letter.offset}",
            )

    async def _reset(self, producer: AIOKafkaProducer) -> None:
        async with self._lock:
            if self._producer is producer:
                self._producer = None
        try:
            await asyncio.wait_for(producer.stop(), self.timeout)
        except Exception as exc:
            log.info("dead_letter_producer_close_failed", error=str(exc)[:300])

    async def close(self) -> None:
        if self._producer is not None:
            await self._producer.stop()
            self._producer = None
