"""Embedded `/track` throughput: 2000-event JSON bodies (each event carrying its project
token, no credentials), 8 connections, sent by this (separate) client process to a
`footfall serve` subprocess over HTTP.

The client pre-serialises its request bodies so that what is measured is the server. It
sends `strict=1` so that every answer states how many events were stored (the per-event
work is the same as without it). Event times lie within the last 4 days (older than 5 are
refused on /track). Result: bench/results/track_embedded.json (sustained events/s,
per-request latency, the load average around the run).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

import httpx
import orjson

from bench._common import BOOTSTRAP_ENV, realistic_event, serve, write_result

BATCH = 2000
TOKEN = BOOTSTRAP_ENV["FOOTFALL_BOOTSTRAP_TOKEN"]


def make_bodies(count: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    now = int(time.time())
    bodies = []
    for _ in range(count):
        events = [realistic_event(rng, now) for _ in range(BATCH)]
        for e in events:
            e["properties"]["token"] = TOKEN
            e["properties"]["time"] = now - rng.randint(0, 86_400 * 4)
        bodies.append(orjson.dumps(events))
    return bodies


async def blast(base: str, bodies: list[bytes], seconds: float, concurrency: int) -> dict[str, object]:
    latencies: list[float] = []
    imported = 0
    errors = 0
    deadline = time.perf_counter() + seconds
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=base, timeout=60.0, limits=limits) as client:

        async def sender(offset: int) -> None:
            nonlocal imported, errors
            i = offset
            while time.perf_counter() < deadline:
                body = bodies[i % len(bodies)]
                i += concurrency
                started = time.perf_counter()
                r = await client.post("/track?strict=1", content=body, headers={"Content-Type": "application/json"})
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
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args(argv)
    # Distinct bodies so dedup never short-circuits the work; 60 bodies = 120,000 events.
    bodies = make_bodies(60, seed=11)
    with tempfile.TemporaryDirectory(prefix="footfall-bench-") as tmp, serve(Path(tmp)) as base:
        asyncio.run(blast(base, bodies[:2], 3.0, args.concurrency))  # warm-up
        load_before = os.getloadavg()
        result = asyncio.run(blast(base, bodies, args.seconds, args.concurrency))
        load_after = os.getloadavg()
    write_result(
        "track_embedded",
        {
            "command": "make bench BENCH_ARGS=track_embedded",
            "batch_size": BATCH,
            "concurrency": args.concurrency,
            "target_events_per_second": 30_000,
            "load_average_1_5_15_before": [round(x, 2) for x in load_before],
            "load_average_1_5_15_after": [round(x, 2) for x in load_after],
            **result,
        },
    )


if __name__ == "__main__":
    main()
