"""Embedded `/import` throughput: strict=1, 2000-event batches of realistic events, sent by
this (separate) client process to a `footfall serve` subprocess over HTTP.

    .venv/bin/python -m bench import_embedded                 # 60 s, 8 connections (issue 17)
    .venv/bin/python -m bench.import_embedded --seconds 20 --concurrency 4

The client pre-serialises its request bodies so that what is measured is the server. Besides
events/s it reports the serve process's CPU per event (user + system, µs; every thread,
chDB's included), its peak and final RSS, and the load average before and after, since the
machine may be shared. Targets (issue 17): ≥ 60,000 events/s, serve RSS < 1.5 GB.
Result: bench/results/import_embedded.json (sustained events/s, per-request latency).
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


def serve_pid() -> int:
    """The `footfall serve` child of this process."""
    me = str(os.getpid())
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if stat.rsplit(")", 1)[1].split()[1] == me and b"serve" in (entry / "cmdline").read_bytes():
                return int(entry.name)
    raise RuntimeError("no serve process found")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def rss_mb(pid: int) -> dict[str, float]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("VmHWM:", "VmRSS:")):
            out[line[:5]] = round(int(line.split()[1]) / 1024, 1)
    return {"serve_rss_mb_peak": out.get("VmHWM", 0.0), "serve_rss_mb_end": out.get("VmRSS", 0.0)}


def fast_path_counts(base: str) -> dict[str, int]:
    """`footfall_import_fast_path_total` by outcome (taken, declined), from serve's /metrics."""
    counts: dict[str, int] = {}
    for line in httpx.get(base + "/metrics", timeout=30).text.splitlines():
        if line.startswith("footfall_import_fast_path_total{"):
            outcome = line.split('outcome="', 1)[1].split('"', 1)[0]
            counts[outcome] = int(float(line.split()[-1]))
    return counts


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
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--name", default="import_embedded", help="results file name (A/B runs)")
    args = parser.parse_args(argv)
    # Distinct bodies so dedup never short-circuits the work; 60 bodies = 120,000 events.
    bodies = make_bodies(60, seed=7)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="footfall-bench-") as tmp, serve(Path(tmp)) as base:
        pid = serve_pid()
        asyncio.run(blast(base, bodies[:2], 3.0, args.concurrency))  # warm-up
        cpu = cpu_seconds(pid)
        result = asyncio.run(blast(base, bodies, args.seconds, args.concurrency))
        cpu = cpu_seconds(pid) - cpu
        memory = rss_mb(pid)
        fast_path = fast_path_counts(base)
    imported = int(str(result["events_imported"]))
    write_result(
        args.name,
        {
            "command": ".venv/bin/python -m bench import_embedded",
            "batch_size": BATCH,
            "concurrency": args.concurrency,
            "target_events_per_second": 60_000,
            "target_serve_rss_mb": 1500,
            **result,
            # FOOTFALL_IMPORT_FAST_PATH (default 1) and how many requests the Rust fast path took
            "import_fast_path": os.environ.get("FOOTFALL_IMPORT_FAST_PATH", "1"),
            "fast_path_requests": fast_path,
            "serve_cpu_seconds": round(cpu, 1),
            "serve_cores_used": round(cpu / float(str(result["seconds"])), 2),
            "serve_cpu_us_per_event": round(cpu * 1e6 / imported, 1) if imported else None,
            **memory,
            "load_average_before": [round(x, 2) for x in load_before],
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
        },
    )


if __name__ == "__main__":
    main()
