"""Ingestion under export load (issue 15): `/import` latency while 12 raw exports stream.

A `footfall serve` subprocess (embedded chDB) is seeded with realistic events; then one
client sends small `/import` batches back to back (100 events, strict=1) for `--seconds`,
first alone (baseline), then while `--exports` clients each run `/api/2.0/export` over the
whole range in a loop, reading every byte. The exporters run in a separate process so
that their parsing does not delay the import client's event loop. The export rate limits
are disabled for the run (FOOTFALL_EXPORT_RATE_PER_SECOND/PER_HOUR=0): what is measured is
the separation of the warehouse lanes, not the 429s.

Target: import p99 < 200 ms under 12 concurrent exports.
Result: bench/results/import_under_export.json.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import random
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import orjson

from bench._common import BOOTSTRAP_ENV, realistic_event, serve, write_result

TOKEN = BOOTSTRAP_ENV["FOOTFALL_BOOTSTRAP_TOKEN"]
SECRET = BOOTSTRAP_ENV["FOOTFALL_BOOTSTRAP_SECRET"]
JSON = {"Content-Type": "application/json"}


def _bodies(count: int, size: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    now = int(time.time())
    return [orjson.dumps([realistic_event(rng, now) for _ in range(size)]) for _ in range(count)]


async def _seed(base: str, events: int) -> None:
    async with httpx.AsyncClient(base_url=base, auth=(TOKEN, ""), timeout=120.0) as client:
        for body in _bodies(events // 2000, 2000, seed=1):
            r = await client.post("/import?strict=1", content=body, headers=JSON)
            r.raise_for_status()


async def _imports(base: str, seconds: float) -> dict[str, Any]:
    bodies = _bodies(400, 100, seed=int(time.time()))
    latencies: list[float] = []
    errors = 0
    async with httpx.AsyncClient(base_url=base, auth=(TOKEN, ""), timeout=60.0) as client:
        deadline = time.perf_counter() + seconds
        i = 0
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            r = await client.post("/import?strict=1", content=bodies[i % len(bodies)], headers=JSON)
            latencies.append(time.perf_counter() - started)
            errors += r.status_code != 200
            i += 1
    latencies.sort()
    return {
        "requests": len(latencies),
        "errors": errors,
        "latency_ms_p50": round(statistics.median(latencies) * 1000, 1),
        "latency_ms_p99": round(latencies[max(0, int(len(latencies) * 0.99) - 1)] * 1000, 1),
        "latency_ms_max": round(latencies[-1] * 1000, 1),
    }


async def _exporters(base: str, clients: int, seconds: float) -> dict[str, Any]:
    today = datetime.now(UTC).date()
    params = {"from_date": str(today - timedelta(days=7)), "to_date": str(today + timedelta(days=1))}
    rows = 0
    nbytes = 0
    done = 0
    statuses: dict[int, int] = {}
    deadline = time.perf_counter() + seconds
    async with httpx.AsyncClient(base_url=base, auth=(SECRET, ""), timeout=120.0) as client:

        async def one() -> None:
            nonlocal rows, nbytes, done
            while time.perf_counter() < deadline:
                async with client.stream("GET", "/api/2.0/export", params=params) as r:
                    statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
                    async for chunk in r.aiter_bytes():
                        nbytes += len(chunk)
                        rows += chunk.count(b"\n")
                done += 1

        started = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(clients)))
        elapsed = time.perf_counter() - started
    return {
        "exports_completed": done,
        "export_statuses": statuses,
        "export_rows_per_second": round(rows / elapsed),
        "export_mb_per_second": round(nbytes / elapsed / 2**20, 1),
    }


def _exporter_process(base: str, clients: int, seconds: float, out: Any) -> None:
    out.put(asyncio.run(_exporters(base, clients, seconds)))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--exports", type=int, default=12)
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE for the server (repeatable)")
    args = parser.parse_args(argv)
    env = {"FOOTFALL_EXPORT_RATE_PER_SECOND": "0", "FOOTFALL_EXPORT_RATE_PER_HOUR": "0"}
    env.update(item.split("=", 1) for item in args.env)
    with tempfile.TemporaryDirectory(prefix="footfall-bench-") as tmp, serve(Path(tmp), env) as base:
        asyncio.run(_seed(base, args.events))
        baseline = asyncio.run(_imports(base, min(10.0, args.seconds)))
        ctx = multiprocessing.get_context("spawn")
        out = ctx.Queue()
        exporters = ctx.Process(target=_exporter_process, args=(base, args.exports, args.seconds + 2, out))
        exporters.start()
        time.sleep(2.0)  # the exports are under way
        loaded = asyncio.run(_imports(base, args.seconds))
        exported = out.get(timeout=args.seconds + 300)
        exporters.join()
    write_result(
        "import_under_export",
        {
            "command": "make bench BENCH_ARGS=import_under_export",
            "store": "embedded chDB (footfall serve)",
            "seeded_events": args.events,
            "server_env": env,
            "import_batch": 100,
            "concurrent_exports": args.exports,
            "target_import_latency_ms_p99": 200,
            "imports_alone": baseline,
            "imports_under_exports": loaded,
            **exported,
        },
    )


if __name__ == "__main__":
    main()
