"""End to end: `footfall gateway` → Kafka → `footfall worker` (chDB) at a paced rate, for
a sustained period; how many events/s become queryable, and the delay from the gateway's
200 to the event being queryable through the export endpoint (p50/p99).

Every request (2000 realistic events, strict=1) carries one probe event with a unique
name; a poller asks the worker's export endpoint (it serves the query routes, as the only
process that may open the chDB folder) for the pending probes every 100 ms. The delay of
a probe is (first seen) − (200 received), so it includes up to one poll interval.
Result: bench/results/end_to_end.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import orjson

from bench._common import BOOTSTRAP_ENV, REPO, realistic_event, write_result
from bench._kafka import footfall, service, unique_prefix

BATCH = 2000
POLL_SECONDS = 0.1


def make_bodies(count: int, seed: int) -> list[list[dict[str, Any]]]:
    rng = random.Random(seed)
    now = int(time.time())
    return [[realistic_event(rng, now) for _ in range(BATCH - 1)] for _ in range(count)]


def probe(name: str) -> dict[str, Any]:
    return {
        "event": name,
        "properties": {"time": int(time.time()), "distinct_id": "bench-probe", "$insert_id": name.replace("_", "-")},
    }


async def run(
    gateway: str, worker: str, rate: float, seconds: float, bodies: list[list[dict[str, Any]]]
) -> dict[str, Any]:
    auth = (BOOTSTRAP_ENV["FOOTFALL_BOOTSTRAP_TOKEN"], "")
    query_auth = (BOOTSTRAP_ENV["FOOTFALL_BOOTSTRAP_SECRET"], "")
    interval = BATCH / rate
    acked_at: dict[str, float] = {}
    seen_at: dict[str, float] = {}
    statuses: dict[int, int] = {}
    imported = 0
    run_id = f"p{int(time.time())}"
    today = datetime.now(UTC).date()
    export_params = {"from_date": (today - timedelta(days=1)).isoformat(), "to_date": today.isoformat()}
    sending = True

    async with httpx.AsyncClient(timeout=60.0) as client:

        async def send(i: int) -> None:
            nonlocal imported
            name = f"{run_id}_{i:05d}"
            body = orjson.dumps([*bodies[i % len(bodies)], probe(name)])
            r = await client.post(
                gateway + "/import?strict=1", content=body, auth=auth, headers={"Content-Type": "application/json"}
            )
            statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
            if r.status_code == 200:
                acked_at[name] = time.perf_counter()
                imported += r.json()["num_records_imported"]

        async def poll() -> None:
            while sending or len(seen_at) < len(acked_at):
                pending = [n for n in acked_at if n not in seen_at][:200]
                if pending:
                    r = await client.get(
                        worker + "/api/2.0/export",
                        params={**export_params, "event": orjson.dumps(pending).decode()},
                        auth=query_auth,
                    )
                    now = time.perf_counter()
                    if r.status_code == 200:
                        for line in r.content.splitlines():
                            name = orjson.loads(line)["event"]
                            seen_at.setdefault(name, now)
                await asyncio.sleep(POLL_SECONDS)

        poller = asyncio.create_task(poll())
        started = time.perf_counter()
        tasks = []
        i = 0
        while time.perf_counter() - started < seconds:
            tasks.append(asyncio.create_task(send(i)))
            i += 1
            next_at = started + i * interval
            await asyncio.sleep(max(next_at - time.perf_counter(), 0))
        await asyncio.gather(*tasks)
        send_seconds = time.perf_counter() - started
        sending = False
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(poller, 120)
        last_seen = max(seen_at.values()) if seen_at else time.perf_counter()

    delays = sorted(seen_at[n] - acked_at[n] for n in seen_at)
    return {
        "target_events_per_second": rate,
        "seconds": round(send_seconds, 1),
        "requests": i,
        "statuses": statuses,
        "events_acknowledged": imported,
        "acknowledged_events_per_second": round(imported / send_seconds),
        "queryable_events_per_second": round(imported / (last_seen - started)) if seen_at else 0,
        "probes": len(acked_at),
        "probes_seen": len(seen_at),
        "delay_s_p50": round(statistics.median(delays), 3) if delays else None,
        "delay_s_p99": round(delays[max(int(len(delays) * 0.99) - 1, 0)], 3) if delays else None,
        "delay_s_max": round(delays[-1], 3) if delays else None,
    }


def publish_directory(env: dict[str, str]) -> None:
    full = {k: v for k, v in os.environ.items() if not k.startswith("FOOTFALL_")} | BOOTSTRAP_ENV | env
    done = subprocess.run(
        [sys.executable, "-m", "footfall.services.cli", "directory", "publish"], cwd=REPO, env=full, capture_output=True
    )
    if done.returncode != 0:
        raise SystemExit(done.stderr.decode(errors="replace"))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=float, default=10_000.0, help="events/s offered")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--consumers", type=int, default=2)
    args = parser.parse_args(argv)
    bodies = make_bodies(40, seed=5)
    with (
        service("kafka") as bootstrap,
        service("redis") as redis,
        tempfile.TemporaryDirectory(prefix="footfall-bench-") as tmp,
    ):
        env = {
            "FOOTFALL_KAFKA_BOOTSTRAP": bootstrap,
            "FOOTFALL_REDIS_URL": redis,
            "FOOTFALL_KAFKA_TOPIC_PREFIX": unique_prefix("e2e"),
            "FOOTFALL_DATA_DIR": str(Path(tmp) / "data"),
        }
        publish_directory(env)
        worker = footfall(["worker", "--consumers", str(args.consumers)], env, Path(tmp) / "worker.log")
        gateway = footfall(["gateway"], env, Path(tmp) / "gateway.log")
        try:
            result = asyncio.run(run(gateway.base, worker.base, args.rate, args.seconds, bodies))
            result["worker_cpu_seconds"] = round(worker.cpu_seconds(), 1)
            result["gateway_cpu_seconds"] = round(gateway.cpu_seconds(), 1)
        finally:
            gateway.stop()
            worker.stop()
    write_result(
        "end_to_end",
        {
            "command": "make bench BENCH_ARGS=end_to_end",
            "what": "client -> footfall gateway -> Kafka -> footfall worker (chDB, Redis dedup) -> export; "
            "all on one machine",
            "batch_size": BATCH,
            "consumers": args.consumers,
            "target": {"events_per_second": 10_000, "delay_s_p99_under": 5},
            **result,
        },
    )


if __name__ == "__main__":
    main()
