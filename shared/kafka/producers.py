"""Durable producers for the small side topics (dead letters, the credential directory)."""

from __future__ import annotations

from aiokafka import AIOKafkaProducer


async def start_durable_producer(
    bootstrap: str, *, client_id: str, timeout: float, max_request_size: int, compression: str = "gzip"
) -> AIOKafkaProducer:
    """An idempotent `acks=all` producer, started; stopped again when starting fails."""
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        client_id=client_id,
        acks="all",
        enable_idempotence=True,
        compression_type=compression,
        max_request_size=max_request_size,
        request_timeout_ms=int(timeout * 1000),
    )
    try:
        await producer.start()
    except BaseException:
        await producer.stop()
        raise
    return producer
