"""Embedded `/import` throughput: strict=1, 2000-event batches of realistic events, sent by
this (separate) client process to a `footfall serve` subprocess over HTTP.

The client pre-serialises its request bodies so that what is measured is the server.
Result: bench/results/import_embedded.json (sustained events/s, per-request latency).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from pathlib import Path

import httpx
import orjson

from bench._common import BOOTSTRAP_ENV, realistic_event, serve, write_result

BATCH = 2000


def make_bodies(count: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    now = int(time.time())
    return [orjson.dumps([realistic_event(rng, now) for _ in range(BATCH)]) for _ in range(count)]


async def blast(base: str, bodies: list[bytes], seconds: float, concurrency: int) -> dict[str, object]:
    auth = (BOOTSTRAP_ENV["FOOTFALL_BOOTSTRAP_TOKEN"], "")
    latencies: list[float] = []
    imported = 0
    errors = 0
    deadline = time.perf_counter() + seconds
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=base, auth=auth, timeout=60.0, limits=limits) as client:

        async def sender(offset: int) -> None:
            nonlocal imported, errors
            i = offset
            while time.perf_counter() < deadline:
                body = bodies[i % len(bodies)]
                i += concurrency
                started = time.perf_counter()
                r = await client.post("/import?strict=1", content=body, headers={"Content-Type": "application/json"})
                latencies.append(time.perf_counter() - started)
                if r.status_code == 200:
                    imported += r.json()["num_records_imported"]
                else:
                    errors += 1

        started = time.perf_counter()
        await asyncio.gather(*(sender(k) for k in range(concurrency)))
        elapsed = time.perf_counter() - started
    latencies.sort()
    return {
        "events_imported": imported,
        "seconds": round(elapsed, 2),
        "events_per_second": round(imported / elapsed),
        "requests": len(latencies),
        "errors": errors,
        "latency_ms_p50": round(statistics.median(latencies) * 1000, 1),
        "latency_ms_p99": round(latencies[int(len(latencies) * 0.99) - 1] * 1000, 1) if latencies else None,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args(argv)
    # Distinct bodies so dedup never short-circuits the work; 60 bodies = 120,000 events.
    bodies = make_bodies(60, seed=7)
    with tempfile.TemporaryDirectory(prefix="footfall-bench-") as tmp, serve(Path(tmp)) as base:
        asyncio.run(blast(base, bodies[:2], 3.0, args.concurrency))  # warm-up
        result = asyncio.run(blast(base, bodies, args.seconds, args.concurrency))
    write_result(
        "import_embedded",
        {
            "command": "make bench BENCH_ARGS=import_embedded",
            "batch_size": BATCH,
            "concurrency": args.concurrency,
            "target_events_per_second": 30_000,
            **result,
        },
    )


if __name__ == "__main__":
    main()
