"""Embedded `/engage` throughput: profile updates of mixed operations, 2000 per request, sent by
this (separate) client process to a `footfall serve` subprocess over HTTP (strict=1).

Every body is distinct (no update is a replay that the store would skip cheaply); the
updates touch 200,000 profiles with `$set`, `$set_once`, `$add`, `$union`, `$append`,
`$remove`, `$unset` and a few `$delete`s, in increasing `$time` with a share arriving a
minute late (so some profiles are replayed from their log). The client pre-serialises its
bodies so that what is measured is the server.
Result: bench/results/profiles_embedded.json: sustained updates/s and per-request latency,
with the load average beside them, the server's CPU per update (`process_cpu_seconds_total`
of its `/metrics` over the measured window; the figure that a shared machine disturbs least)
and its peak resident memory (`process_resident_memory_bytes`, sampled every half second).
The store starts empty, so `serve`'s profile state cache (`FOOTFALL_PROFILE_CACHE_SIZE`,
default 250,000 with chDB) holds every profile and no state is read from the warehouse;
`--profile-cache 0` measures without it.

    .venv/bin/python -m bench profiles_embedded      (or: -m bench.profiles_embedded --seconds 20 --concurrency 4)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

from bench._common import BOOTSTRAP_ENV, serve, write_result

BATCH = 2000
PROFILES = 200_000
TARGET = 20_000


def make_update(rng: random.Random, t_ms: int) -> dict[str, Any]:
    user = f"user-{rng.randrange(PROFILES)}"
    op = rng.choices(
        ["$set", "$set_once", "$add", "$union", "$append", "$remove", "$unset", "$delete"],
        [30, 10, 25, 10, 8, 8, 6, 1],
    )[0]
    value: Any = {
        "$set": {"plan": rng.choice(["free", "pro", "team"]), "$email": f"{user}@example.com", "seen": t_ms},
        "$set_once": {"first_seen": t_ms, "source": rng.choice(["ads", "seo", "referral"])},
        "$add": {"logins": 1, "spend": round(rng.random() * 50, 2)},
        "$union": {"devices": [rng.choice(["ios", "android", "web", "mac"])]},
        "$append": {"events": rng.randrange(1000)},
        "$remove": {"devices": rng.choice(["ios", "android", "web", "mac"])},
        "$unset": ["source"],
        "$delete": "",
    }[op]
    late = rng.random() < 0.05
    return {
        "$token": BOOTSTRAP_ENV["FOOTFALL_BOOTSTRAP_TOKEN"],
        "$distinct_id": user,
        op: value,
        "$time": t_ms - (60_000 if late else 0),
    }


def make_bodies(count: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    start = int(time.time() * 1000) - 3_000_000
    bodies = []
    for b in range(count):
        bodies.append(orjson.dumps([make_update(rng, start + (b * BATCH + i) * 3) for i in range(BATCH)]))
    return bodies


def _metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise RuntimeError(f"the server's /metrics has no {name}")


def server_cpu_seconds(base: str) -> float:
    """The server process's CPU time so far (user + system), from its `/metrics`."""
    return _metric(httpx.get(base + "/metrics", timeout=10.0).text, "process_cpu_seconds_total")


async def sample_rss(client: httpx.AsyncClient, peak: list[float], stop: asyncio.Event) -> None:
    """The server's resident memory (`process_resident_memory_bytes`), sampled every half
    second until `stop`: `peak[0]` is the highest seen."""
    while not stop.is_set():
        with contextlib.suppress(httpx.HTTPError):
            r = await client.get("/metrics")
            peak[0] = max(peak[0], _metric(r.text, "process_resident_memory_bytes"))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.5)


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


async def blast(base: str, bodies: list[bytes], seconds: float, concurrency: int) -> dict[str, Any]:
    latencies: list[float] = []
    applied = 0
    errors = 0
    deadline = time.perf_counter() + seconds
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    queue = list(reversed(bodies))
    peak = [0.0]
    stop = asyncio.Event()
    async with (
        httpx.AsyncClient(base_url=base, timeout=120.0, limits=limits) as client,
        httpx.AsyncClient(base_url=base, timeout=10.0) as watcher,
    ):
        sampler = asyncio.create_task(sample_rss(watcher, peak, stop))

        async def sender() -> None:
            nonlocal applied, errors
            while time.perf_counter() < deadline and queue:
                body = queue.pop()
                started = time.perf_counter()
                r = await client.post(
                    "/engage?strict=1&ip=0", content=body, headers={"Content-Type": "application/json"}
                )
                latencies.append(time.perf_counter() - started)
                if r.status_code in (200, 400):
                    applied += r.json()["num_good_events"]
                else:
                    errors += 1

        started = time.perf_counter()
        await asyncio.gather(*(sender() for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
        stop.set()
        await sampler
    latencies.sort()
    return {
        "updates_applied": applied,
        "seconds": round(elapsed, 2),
        "updates_per_second": round(applied / elapsed),
        "requests": len(latencies),
        "errors": errors,
        "ran_out_of_bodies": not queue,
        "latency_ms_p50": round(statistics.median(latencies) * 1000, 1),
        "latency_ms_p99": round(latencies[int(len(latencies) * 0.99) - 1] * 1000, 1) if latencies else None,
        "server_peak_rss_mb": round(peak[0] / 2**20),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--bodies", type=int, default=300, help="distinct 2000-update bodies prepared")
    parser.add_argument("--profile-cache", type=int, default=None, help="FOOTFALL_PROFILE_CACHE_SIZE of the server")
    args = parser.parse_args(argv)
    bodies = make_bodies(args.bodies + 3, seed=11)
    env = {} if args.profile_cache is None else {"FOOTFALL_PROFILE_CACHE_SIZE": str(args.profile_cache)}
    with tempfile.TemporaryDirectory(prefix="footfall-bench-") as tmp, serve(Path(tmp), env) as base:
        asyncio.run(blast(base, bodies[:3], 30.0, 1))  # warm-up (its own bodies)
        load_before, cpu_before = load_average(), server_cpu_seconds(base)
        result = asyncio.run(blast(base, bodies[3:], args.seconds, args.concurrency))
        cpu = server_cpu_seconds(base) - cpu_before
        applied = int(result["updates_applied"])
        result["server_cpu_us_per_update"] = round(cpu / applied * 1e6, 1) if applied else None
        result["load_average_before"] = load_before
        result["load_average_after"] = load_average()
    write_result(
        "profiles_embedded",
        {
            "command": ".venv/bin/python -m bench profiles_embedded",
            "batch_size": BATCH,
            "profiles": PROFILES,
            "concurrency": args.concurrency,
            "profile_cache": args.profile_cache,  # None: the server's default
            "target_updates_per_second": TARGET,
            **result,
        },
    )


if __name__ == "__main__":
    main()
