"""End to end: `footfall gateway` → Kafka → the worker consumers (chDB) at a paced rate, for
a sustained period; how many events/s become queryable, and the delay from the gateway's
200 to the event being queryable through the export endpoint (p50/p99).

    .venv/bin/python -m bench.end_to_end --rate 30000 --seconds 60   (or: python -m bench end_to_end, defaults)

CPU per component, in µs per acknowledged event, so the bottleneck is visible on a shared
machine: the gateway processes (`--gateway-workers`, uvicorn workers of one `footfall
gateway`), the worker's Python threads and its engine threads (chDB's own named threads;
an insert's parsing in the calling Python thread counts as Python), the broker and Redis
(the processes listening on their ports; shared with anything else using them) and this
client. The load average is printed beside the figures.

Every request (2000 realistic events, strict=1) carries one probe event with a unique
name; a poller asks the export endpoint for the pending probes every 100 ms. `footfall
worker` only ingests, and only one process may open a chDB folder, so the consumers run in
`footfall serve` with FOOTFALL_KAFKA_BOOTSTRAP (the documented way to ingest from Kafka
into chDB and query it): the same `WorkerGroup`, beside the query routes (its /import is
not used here; the export polls count in the worker's CPU). The delay of
a probe is (first seen) − (200 received), so it includes up to one poll interval.
Result: bench/results/end_to_end.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import resource
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

from bench._common import BOOTSTRAP_ENV, REPO, UNLIMITED_EXPORTS, UNLIMITED_IMPORTS, realistic_event, write_result
from bench._kafka import footfall, service, unique_prefix

BATCH = 2000
POLL_SECONDS = 0.1
TAG = "@tag@"  # where a request's own $insert_id prefix goes in a serialized body


def make_bodies(count: int, seed: int) -> list[list[dict[str, Any]]]:
    rng = random.Random(seed)
    now = int(time.time())
    return [[realistic_event(rng, now) for _ in range(BATCH - 1)] for _ in range(count)]


def probe(name: str) -> dict[str, Any]:
    return {
        "event": name,
        "properties": {"time": int(time.time()), "distinct_id": "bench-probe", "$insert_id": name.replace("_", "-")},
    }


def templates(bodies: list[list[dict[str, Any]]]) -> list[bytes]:
    """Each body serialized once, with TAG for the request's $insert_id prefix and without
    the closing bracket (the probe follows): the client makes a request's body with one
    bytes.replace instead of rebuilding and serializing 2000 events (≈ 6 µs of this machine's
    CPU per event, taken from the system under test)."""
    return [orjson.dumps(unique(body, TAG))[:-1] for body in bodies]


def request_body(template: bytes, name: str) -> bytes:
    tag = name.replace("_", "-").encode()
    return b"".join((template.replace(TAG.encode(), tag), b",", orjson.dumps(probe(name)), b"]"))


def unique(body: list[dict[str, Any]], tag: str) -> list[dict[str, Any]]:
    """The body with fresh $insert_ids: every request's events are new to the dedup layers
    (reusing the 40 bodies as they are made all but the first 80,000 events duplicates,
    which the Redis layer drops before any insert)."""
    return [
        {"event": e["event"], "properties": {**e["properties"], "$insert_id": f"{tag}-{j}"}} for j, e in enumerate(body)
    ]


def processed_from_metrics(text: str) -> int:
    """Records the worker finished with (inserted, duplicate or dead-lettered)."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith("footfall_worker_messages_total{"):
            total += float(line.rsplit(" ", 1)[1])
    return int(total)


def delay_quantiles_from_metrics(text: str) -> dict[str, float | None]:
    """p50/p99 upper bucket bounds of footfall_worker_event_delay_seconds (accepted → inserted)."""
    buckets = []
    for line in text.splitlines():
        if line.startswith("footfall_worker_event_delay_seconds_bucket{"):
            le = line.split('le="', 1)[1].split('"', 1)[0]
            buckets.append((float("inf") if le == "+Inf" else float(le), float(line.rsplit(" ", 1)[1])))
    buckets.sort()
    count = buckets[-1][1] if buckets else 0.0

    def q(p: float) -> float | None:
        return next((le for le, n in buckets if count and n >= p * count), None)

    return {"delay_s_p50_bucket": q(0.5), "delay_s_p99_bucket": q(0.99)}


async def run(
    gateway: str, worker: str, rate: float, seconds: float, bodies: list[list[dict[str, Any]]], host: str
) -> dict[str, Any]:
    serialized = templates(bodies)
    auth = (BOOTSTRAP_ENV["FOOTFALL_BOOTSTRAP_TOKEN"], "")
    query_auth = (BOOTSTRAP_ENV["FOOTFALL_BOOTSTRAP_SECRET"], "")
    interval = BATCH / rate
    acked_at: dict[str, float] = {}
    seen_at: dict[str, float] = {}
    statuses: dict[int, int] = {}
    poll_statuses: dict[str, int] = {}  # the export polls' answers (a failing poll sees nothing)
    imported = 0
    run_id = f"p{int(time.time())}"
    today = datetime.now(UTC).date()
    export_params = {"from_date": (today - timedelta(days=1)).isoformat(), "to_date": today.isoformat()}
    sending = True

    async with httpx.AsyncClient(timeout=60.0) as client:

        async def send(i: int) -> None:
            nonlocal imported
            name = f"{run_id}_{i:05d}"
            body = request_body(serialized[i % len(serialized)], name)
            r = await client.post(
                gateway + "/import?strict=1", content=body, auth=auth, headers={"Content-Type": "application/json"}
            )
            statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
            if r.status_code == 200:
                acked_at[name] = time.perf_counter()
                imported += r.json()["num_records_imported"]

        async def poll_metrics() -> None:
            # `footfall worker` serves no queries: done when it finished every acknowledged
            # record (then they are inserted, hence queryable); delays from its histogram.
            while sending or processed_from_metrics((await client.get(worker + "/metrics")).text) < imported:
                await asyncio.sleep(POLL_SECONDS)
            now = time.perf_counter()
            for name in acked_at:
                seen_at[name] = now

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
                    answer = str(r.status_code) if r.status_code == 200 else f"{r.status_code} {r.text[:120]}"
                    poll_statuses[answer] = poll_statuses.get(answer, 0) + 1
                    if r.status_code == 200:
                        for line in r.content.splitlines():
                            name = orjson.loads(line)["event"]
                            seen_at.setdefault(name, now)
                await asyncio.sleep(POLL_SECONDS)

        poller = asyncio.create_task(poll() if host == "serve" else poll_metrics())
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
        metrics_text = (await client.get(worker + "/metrics")).text

    delays = sorted(seen_at[n] - acked_at[n] for n in seen_at) if host == "serve" else []
    return {
        "consumers_in": host,
        **(delay_quantiles_from_metrics(metrics_text) if host == "worker" else {}),
        "target_events_per_second": rate,
        "seconds": round(send_seconds, 1),
        "requests": i,
        "statuses": statuses,
        "events_acknowledged": imported,
        "acknowledged_events_per_second": round(imported / send_seconds),
        "queryable_events_per_second": round(imported / (last_seen - started)) if seen_at else 0,
        "probes": len(acked_at),
        "probes_seen": len(seen_at),  # each probe's delay counts: all must be seen
        "poll_statuses": poll_statuses,
        "delay_s_p50": round(statistics.median(delays), 3) if delays else None,
        "delay_s_p99": round(delays[max(int(len(delays) * 0.99) - 1, 0)], 3) if delays else None,
        "delay_s_max": round(delays[-1], 3) if delays else None,
    }


def _ticks(pid: int | str, task: int | str | None = None) -> tuple[str, float]:
    """(comm, user+system CPU seconds) of a process, or of one of its threads."""
    path = Path(f"/proc/{pid}/task/{task}/stat") if task is not None else Path(f"/proc/{pid}/stat")
    head, _, rest = path.read_text().rpartition(")")
    fields = rest.split()
    return head.partition("(")[2], (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def worker_threads_cpu(pid: int) -> dict[str, float]:
    """The worker's CPU split: Python threads (named like the main thread) and the engine's
    (chDB names its threads). Threads that ended are not counted."""
    main_comm, _ = _ticks(pid)
    split = {"python": 0.0, "engine": 0.0}
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            comm, cpu = _ticks(pid, task)
        except OSError:
            continue
        split["python" if comm == main_comm else "engine"] += cpu
    return split


def listening_pid(address: str) -> int | None:
    """The process listening on host:port (redis://host:port/db also), or None."""
    port = int(address.rsplit(":", 1)[1].split("/")[0])
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                cols = line.split()
                if cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(f"socket:[{cols[9]}]")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                        return int(pid)
    return None


def cpu_sample(gateway: Any, worker: Any, broker: int | None, redis: int | None) -> dict[str, float]:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    sample = {"gateway": gateway.cpu_seconds() if gateway else 0.0, "client": usage.ru_utime + usage.ru_stime}
    sample.update({f"worker_{k}": v for k, v in worker_threads_cpu(worker.proc.pid).items()})
    for name, pid in (("broker", broker), ("redis", redis)):
        with contextlib.suppress(OSError, TypeError):
            sample[name] = _ticks(pid)[1]  # type: ignore[arg-type]
    return sample


async def fill_backlog(bootstrap: str, prefix: str, count: int, bodies: list[list[dict[str, Any]]]) -> int:
    """About `count` unique validated events into the events topic, as gateways publish them;
    returns how many."""
    from footfall.services.gateway.kafka_sink import KafkaSink
    from footfall.shared.config import ImportLimits, KafkaSettings
    from footfall.shared.streams import EVENTS, Intake

    sink = KafkaSink(KafkaSettings(bootstrap=bootstrap, topic_prefix=prefix, publish_timeout=60.0))
    await sink.start()
    published = 0
    try:
        for i in range(0, count, BATCH):
            body = unique(bodies[(i // BATCH) % len(bodies)], f"b{i}")
            items, failures = EVENTS.validate(body, Intake(1, True, ImportLimits(), int(time.time() * 1000), 10**9))
            if failures:
                raise SystemExit(f"backlog events invalid: {failures[:3]}")
            await sink.publish(EVENTS, items)
            published += len(items)
    finally:
        await sink.stop()
    return published


def drain(worker: Any, count: int, broker: int | None, redis: int | None) -> dict[str, Any]:
    """Wait until the worker finished `count` more records than now; its CPU meanwhile."""

    def processed() -> int:
        return processed_from_metrics(httpx.get(worker.base + "/metrics", timeout=10).text)

    load_before = os.getloadavg()
    start_count = processed()
    before = cpu_sample(None, worker, broker, redis)
    started = time.perf_counter()
    while processed() < count:
        time.sleep(0.05)
    seconds = time.perf_counter() - started
    after = cpu_sample(None, worker, broker, redis)
    events = count - start_count
    cpu = {k: after[k] - before[k] for k in after if k in before and k not in ("gateway", "client")}
    return {
        "backlog_events": count,
        "events_measured": events,
        "drain_seconds": round(seconds, 2),
        "drained_events_per_second": round(events / seconds),
        "cpu_seconds": {k: round(v, 2) for k, v in cpu.items()},
        "cpu_us_per_event": {k: round(v / max(events, 1) * 1e6, 1) for k, v in cpu.items()},
        "load_average_1m": {"before": round(load_before[0], 2), "after": round(os.getloadavg()[0], 2)},
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
    parser.add_argument("--rate", type=float, default=30_000.0, help="events/s offered")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--consumers", type=int, default=2, help="worker consumers (one process)")
    parser.add_argument("--gateway-workers", type=int, default=2, help="gateway processes (uvicorn workers)")
    parser.add_argument("--batch-size", type=int, default=0, help="FOOTFALL_WORKER_BATCH_SIZE (0: default)")
    parser.add_argument("--batch-seconds", type=float, default=0, help="FOOTFALL_WORKER_BATCH_SECONDS (0: default)")
    parser.add_argument("--name", default="end_to_end", help="result file bench/results/<name>.json")
    parser.add_argument("--log-dir", default="", help="keep the gateway and worker logs here")
    parser.add_argument(
        "--host",
        choices=["serve", "worker"],
        default="serve",
        help="run the consumers in `footfall serve` (probes seen through /export) or `footfall worker` "
        "(done when its metrics count every record; delays from its histogram, bucket bounds)",
    )
    parser.add_argument(
        "--backlog",
        type=int,
        default=0,
        help="worker alone: publish this many unique events first, then time `footfall worker` draining them "
        "(CPU per event of the worker, its engine threads, the broker and Redis; no gateway, no client)",
    )
    parser.add_argument(
        "--python-path",
        action="store_true",
        help="FOOTFALL_IMPORT_FAST_PATH=0: the gateway and the worker without the Rust fast path (for A/B)",
    )
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
            **UNLIMITED_IMPORTS,
        }
        if args.batch_size:
            env["FOOTFALL_WORKER_BATCH_SIZE"] = str(args.batch_size)
        if args.batch_seconds:
            env["FOOTFALL_WORKER_BATCH_SECONDS"] = str(args.batch_seconds)
        env["FOOTFALL_IMPORT_FAST_PATH"] = "0" if args.python_path else "1"
        publish_directory(env)
        logs = Path(args.log_dir or tmp)
        logs.mkdir(parents=True, exist_ok=True)
        if args.backlog:
            count = asyncio.run(fill_backlog(bootstrap, env["FOOTFALL_KAFKA_TOPIC_PREFIX"], args.backlog, bodies))
            worker = footfall(["worker", "--consumers", str(args.consumers)], env, logs / "worker.log")
            try:
                result = drain(worker, count, listening_pid(bootstrap), listening_pid(redis))
            finally:
                worker.stop()
            write_result(
                args.name,
                {
                    "command": f"python -m bench.end_to_end {' '.join(sys.argv[1:] if argv is None else argv)}",
                    "what": "footfall worker draining a backlog of unique events (chDB, Redis dedup)",
                    "consumers": args.consumers,
                    "worker_batch_size": args.batch_size or "default",
                    "fast_path": not args.python_path,
                    **result,
                },
            )
            return
        worker_env = {
            **env,
            "FOOTFALL_WORKER_CONSUMERS": str(args.consumers),
            # The probes' export polls (10 a second) must not meet the export's own rate limit
            # (the interface's 60 an hour): a refused poll sees no probe, so the delays would come
            # from the first minute's probes only.
            **UNLIMITED_EXPORTS,
        }
        worker = footfall(
            ["serve"] if args.host == "serve" else ["worker", "--consumers", str(args.consumers)],
            worker_env,
            logs / "worker.log",
        )
        gateway = footfall(["gateway", "--workers", str(args.gateway_workers)], env, logs / "gateway.log")
        broker_pid, redis_pid = listening_pid(bootstrap), listening_pid(redis)
        try:
            load_before = os.getloadavg()
            before = cpu_sample(gateway, worker, broker_pid, redis_pid)
            result = asyncio.run(run(gateway.base, worker.base, args.rate, args.seconds, bodies, args.host))
            after = cpu_sample(gateway, worker, broker_pid, redis_pid)
            events = max(result["events_acknowledged"], 1)
            cpu = {k: after[k] - before[k] for k in after if k in before}
            result["cpu_seconds"] = {k: round(v, 1) for k, v in cpu.items()}
            result["cpu_us_per_event"] = {k: round(v / events * 1e6, 1) for k, v in cpu.items()}
            result["load_average_1m"] = {"before": round(load_before[0], 2), "after": round(os.getloadavg()[0], 2)}
        finally:
            gateway.stop()
            worker.stop()
    write_result(
        args.name,
        {
            "command": f"python -m bench.end_to_end {' '.join(sys.argv[1:] if argv is None else argv)}".strip(),
            "what": "client -> footfall gateway -> Kafka -> worker consumers (chDB, Redis dedup) -> export; "
            "all on one machine; every event unique",
            "batch_size": BATCH,
            "consumers": args.consumers,
            "gateway_workers": args.gateway_workers,
            "worker_batch_size": args.batch_size or "default",
            "worker_batch_seconds": args.batch_seconds or "default",
            "fast_path": not args.python_path,
            "target": {"events_per_second": 30_000, "delay_s_p99_under": 5, "statuses": "only 200"},
            **result,
        },
    )


if __name__ == "__main__":
    main()
