"""Gateway alone: events/s one `footfall gateway` process accepts into Kafka (strict=1,
2000-event batches of realistic events, acks=all), with the broker on the same machine.

A separate client process sends pre-serialised bodies over HTTP; every 200 means Kafka
acknowledged all 2000 events. Also measured: the same sink without HTTP (`KafkaSink.publish`
in this process), to show where the time goes, and the gateway's CPU seconds per event.
Result: bench/results/gateway_kafka.json.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import time
from pathlib import Path

import orjson

from bench._common import UNLIMITED_IMPORTS, realistic_event, write_result
from bench._kafka import bench_directory, footfall, publish_directory, service, unique_prefix
from bench.import_embedded import BATCH, blast, make_bodies

TARGET = 30_000


async def sink_only(bootstrap: str, prefix: str, seconds: float, concurrency: int) -> dict[str, object]:
    """`KafkaSink.publish` of validated 2000-event batches, no HTTP."""
    from footfall.services.gateway.kafka_sink import KafkaSink
    from footfall.shared.config import ImportLimits, KafkaSettings
    from footfall.shared.events import validate_batch
    from footfall.shared.streams import EVENTS

    sink = KafkaSink(KafkaSettings(bootstrap=bootstrap, topic_prefix=prefix))
    await sink.start()
    rng = random.Random(3)
    now = int(time.time())
    raw = orjson.loads(orjson.dumps([realistic_event(rng, now) for _ in range(BATCH)]))
    events, failures = validate_batch(
        raw, project_id=1, strict=True, limits=ImportLimits(), now_ms=now * 1000, body_bytes=len(orjson.dumps(raw))
    )
    assert not failures
    published = 0
    deadline = time.perf_counter() + seconds

    async def loop() -> None:
        nonlocal published
        while time.perf_counter() < deadline:
            await sink.publish(EVENTS, events)
            published += len(events)

    started = time.perf_counter()
    await asyncio.gather(*(loop() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    await sink.stop()
    return {
        "events_per_second": round(published / elapsed),
        "concurrency": concurrency,
        "compression": sink.compression,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args(argv)
    bodies = make_bodies(60, seed=11)
    runs: dict[str, dict[str, object]] = {}
    with service("kafka") as bootstrap, tempfile.TemporaryDirectory(prefix="footfall-bench-") as tmp:
        prefix = unique_prefix("gw")
        publish_directory(bootstrap, prefix, bench_directory())
        env = {"FOOTFALL_KAFKA_BOOTSTRAP": bootstrap, "FOOTFALL_KAFKA_TOPIC_PREFIX": prefix, **UNLIMITED_IMPORTS}
        gateway = footfall(["gateway"], env, Path(tmp) / "gateway.log")
        try:
            asyncio.run(blast(gateway.base, bodies[:2], 3.0, args.concurrency))  # warm-up
            cpu0 = gateway.cpu_seconds()
            result = asyncio.run(blast(gateway.base, bodies, args.seconds, args.concurrency))
            cpu = gateway.cpu_seconds() - cpu0
        finally:
            gateway.stop()
        result["gateway_cpu_seconds"] = round(cpu, 1)
        result["gateway_cpu_us_per_event"] = round(cpu / max(int(result["events_imported"]), 1) * 1e6, 1)  # type: ignore[call-overload]
        runs["http_one_process"] = result
        runs["sink_only"] = asyncio.run(sink_only(bootstrap, prefix, 10.0, 1))
    write_result(
        "gateway_kafka",
        {
            "command": "make bench BENCH_ARGS=gateway_kafka",
            "what": "footfall gateway (1 process) -> local Kafka 4.x broker (acks=all, idempotent, "
            "per-partition producer batches); client, gateway and broker share the machine",
            "batch_size": BATCH,
            "concurrency": args.concurrency,
            "target_events_per_second": TARGET,
            "events_per_second": runs["http_one_process"]["events_per_second"],
            **runs,
        },
    )


if __name__ == "__main__":
    main()
