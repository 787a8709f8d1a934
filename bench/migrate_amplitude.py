"""Migration throughput: an Amplitude export (zip of gzipped NDJSON per hour, the real format)
served by a local stand-in, migrated by the migration service of a `footfall serve` subprocess
(embedded chDB store) through the same validator and store step as `/import`.

The export is generated once into day files (so the stand-in holds nothing in memory); the job
covers every day. Measured, from the 202 to `succeeded`: events imported per second; CPU per
event of the serve process (the store: inserts and profile commits), of its job process (the
migrate process: fetching, inflating, gathering, choosing profiles) and of the job process's
mapping workers (`FOOTFALL_MIGRATE_WORKERS` processes: decode, map, validate, build rows); peak
RSS (VmHWM) of each (the target is the job process's); the load average beside them. The job
runs `--rounds` times (default 3), each into a fresh `serve`: this machine's rate varies ±15 %
between identical runs (and by up to 40 % between its quiet and slow phases), so every rate is
written and the median round's figures are reported. `stages` times the job's steps on one day
in this process, one core — inflating into blocks, a worker's work per block, rebuilding events —
which also shows the machine's phase.
Target (issue 14): 2,000,000 events at >= 30,000 events/s with peak RSS of the migrate process
< 500 MB.

    python -m bench migrate_amplitude                  # 2,000,000 events, 3 jobs (median reported)
    python -m bench migrate_amplitude --events 200000 --rounds 1  # a quicker run
    python -m bench migrate_amplitude --workers 0      # the mapping in a thread of serve (A/B)
    python -m bench migrate_amplitude --block-bytes 4194304  # larger blocks: less CPU, more memory
Result: bench/results/migrate_amplitude.json
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import io
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Route

from bench._common import BOOTSTRAP_ENV, REPO, free_port, peak_rss_mb, wait_healthy, write_result

FIRST = datetime(2026, 9, 1, tzinfo=UTC)
PER_DAY = 200_000


def record(rng: random.Random, t: datetime, i: int) -> dict[str, Any]:
    u = rng.randrange(50_000)
    stamp = t.strftime("%Y-%m-%d %H:%M:%S.%f")
    return {
        "app": 1,
        "event_type": f"event_{rng.randrange(40):02d}",
        "event_time": stamp,
        "server_upload_time": stamp,
        "user_id": f"user-{u}",
        "device_id": f"dev-{u}",
        "amplitude_id": u,
        "event_id": i,
        "session_id": int(t.timestamp()) * 1000,
        "uuid": str(uuid.UUID(int=rng.getrandbits(128))),
        "city": "Berlin",
        "country": rng.choice(["Germany", "United States", "France"]),
        "os_name": rng.choice(["ios", "android"]),
        "platform": "iOS",
        "event_properties": {"amount": rng.randrange(100), "plan": rng.choice(["free", "pro"])},
        "user_properties": {"tier": rng.choice(["a", "b"]), "initial_utm_source": "EMPTY"},
    }


def generate(folder: Path, events: int) -> int:
    rng = random.Random(1)
    days = max(1, -(-events // PER_DAY))
    made = 0
    for d in range(days):
        day = FIRST + timedelta(days=d)
        n = min(PER_DAY, events - made)
        with zipfile.ZipFile(folder / day.strftime("%Y%m%d.zip"), "w", zipfile.ZIP_STORED) as archive:
            for h in range(24):
                count = n // 24 + (1 if h < n % 24 else 0)
                lines = io.BytesIO()
                for i in range(count):
                    t = day + timedelta(hours=h, seconds=rng.randrange(3600))
                    lines.write(orjson.dumps(record(rng, t, made + i)) + b"\n")
                made += count
                archive.writestr(f"1/1_{day:%Y-%m-%d}_{h}#0.json.gz", gzip.compress(lines.getvalue(), 1))
    return days


def stand_in(folder: Path) -> Starlette:
    async def export(request: Request) -> Response:
        path = folder / f"{request.query_params.get('start', '')[:8]}.zip"
        return FileResponse(path) if path.exists() else Response(status_code=404)

    return Starlette(routes=[Route("/api/2/export", export)])


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def children(pid: int) -> list[int]:
    """The mapping workers of `pid` (its child processes, less multiprocessing's resource tracker)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            found += [int(c) for c in (task / "children").read_text().split()]
    return [c for c in found if b"resource_tracker" not in Path(f"/proc/{c}/cmdline").read_bytes()]


def stages(folder: Path) -> dict[str, float]:
    """µs of CPU per event of each step, on the first day, in this process."""
    from footfall.services.migrate.download import amplitude_blocks
    from footfall.services.migrate.work import BlockSpec, amplitude_block, decode_block
    from footfall.shared.config import ImportLimits

    day = sorted(folder.glob("*.zip"))[0]
    started = time.process_time()
    with day.open("rb") as file:
        blocks = list(amplitude_blocks(file, max_bytes=8 * 1024**3, max_ratio=200))
    inflate = time.process_time() - started
    spec = BlockSpec("bench", 1, ImportLimits(), int(time.time() * 1000))
    started = time.process_time()
    blobs = [amplitude_block(b, spec) for b in blocks]
    work = time.process_time() - started
    started = time.process_time()
    events = sum(len(decode_block(blob, 1).events) for blob in blobs)
    rebuild = time.process_time() - started
    per = 1e6 / max(events, 1)
    return {
        "events": events,
        "inflate_into_blocks_us": round(inflate * per, 1),
        "worker_decode_map_validate_profiles_us": round(work * per, 1),
        "rebuild_events_us": round(rebuild * per, 1),
    }


def one_job(folder: Path, data: Path, days: int, env: dict[str, str]) -> dict[str, Any]:
    """Run one migration of every day into a fresh embedded `serve`; its figures."""
    serve_port = free_port()
    command = [sys.executable, "-m", "footfall.services.cli", "serve", "--port", str(serve_port)]
    proc = subprocess.Popen(
        [*command, "--data", str(data)], cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    base = f"http://127.0.0.1:{serve_port}"
    try:
        wait_healthy(base)
        token = BOOTSTRAP_ENV["FOOTFALL_BOOTSTRAP_TOKEN"]
        last = (FIRST + timedelta(days=days - 1)).date().isoformat()
        body = {"AMPLITUDE_API_KEY": "k", "AMPLITUDE_API_SECRET": "s", "MIXPANEL_TOKEN": token}
        body |= {"START_DATE": FIRST.date().isoformat(), "END_DATE": last}
        load_before = os.getloadavg()
        cpu_before = cpu_seconds(proc.pid)
        started = time.perf_counter()
        job = httpx.post(f"{base}/migrate/amplitude", json=body, timeout=30).json()["results"]
        while job["state"] in ("queued", "running"):
            time.sleep(0.5)
            job = httpx.get(f"{base}/migrate/jobs/{job['id']}", auth=(token, ""), timeout=30).json()["results"]
        seconds = time.perf_counter() - started
        load_after = os.getloadavg()
        cpu_serve = cpu_seconds(proc.pid) - cpu_before
        # serve's job process (started by the job, alive until serve stops) and its mapping workers
        (job_process,) = [c for c in children(proc.pid) if b"job_process" in Path(f"/proc/{c}/cmdline").read_bytes()]
        workers = children(job_process)
        cpu_job = cpu_seconds(job_process)
        cpu_workers = sum(cpu_seconds(w) for w in workers)
        rss = peak_rss_mb(proc.pid)
        rss_job = peak_rss_mb(job_process)
        rss_workers = [round(peak_rss_mb(w)) for w in workers]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    imported = job["counts"]["events_imported"]
    per_event = 1e6 / max(imported, 1)
    return {
        "state": job["state"],
        "events_imported": imported,
        "seconds": round(seconds, 1),
        "events_per_second": round(imported / seconds),
        "load_average_1m": [round(load_before[0], 1), round(load_after[0], 1)],
        "cpu_us_per_event_serve": round(cpu_serve * per_event, 1),
        "cpu_us_per_event_job_process": round(cpu_job * per_event, 1),
        "cpu_us_per_event_workers": round(cpu_workers * per_event, 1),
        "workers": len(workers),
        "peak_rss_mb_job_process": round(rss_job),
        "peak_rss_mb_serve": round(rss),
        "peak_rss_mb_workers": rss_workers,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--rounds", type=int, default=3, help="jobs run one after another, each into a fresh serve")
    parser.add_argument("--workers", type=int, default=None, help="FOOTFALL_MIGRATE_WORKERS (default: the service's)")
    parser.add_argument("--block-bytes", type=int, default=None, help="FOOTFALL_MIGRATE_BLOCK_BYTES")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="footfall-bench-") as tmp:
        folder = Path(tmp) / "export"
        folder.mkdir()
        started = time.perf_counter()
        days = generate(folder, args.events)
        print(f"generated {args.events} events in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        port = free_port()
        server = uvicorn.Server(uvicorn.Config(stand_in(folder), port=port, log_level="error", lifespan="off"))
        threading.Thread(target=server.run, daemon=True).start()
        env = {
            **os.environ,
            **BOOTSTRAP_ENV,
            "FOOTFALL_LOG_LEVEL": "warning",
            "FOOTFALL_MIGRATE_AMPLITUDE_URL": f"http://127.0.0.1:{port}",
        }
        if args.workers is not None:
            env["FOOTFALL_MIGRATE_WORKERS"] = str(args.workers)
        if args.block_bytes is not None:
            env["FOOTFALL_MIGRATE_BLOCK_BYTES"] = str(args.block_bytes)
        try:
            rounds = []
            for n in range(max(1, args.rounds)):
                rounds.append(one_job(folder, Path(tmp) / f"data-{n}", days, env))
                print(f"round {n + 1}: {rounds[-1]['events_per_second']} events/s", file=sys.stderr)
        finally:
            server.should_exit = True
        steps: dict[str, float] = {}
        with contextlib.suppress(ImportError):  # an older tree (A/B runs) has no blocks
            steps = stages(folder)
    median = sorted(rounds, key=lambda r: r["events_per_second"])[len(rounds) // 2]
    write_result(
        "migrate_amplitude",
        {
            "events": args.events,
            "settings": {"workers": args.workers, "block_bytes": args.block_bytes},  # None: the defaults
            "rounds": len(rounds),
            "events_per_second_each": [r["events_per_second"] for r in rounds],
            **median,  # the round with the median rate
            "peak_rss_mb_job_process_max": max(r["peak_rss_mb_job_process"] for r in rounds),
            "peak_rss_mb_serve_max": max(r["peak_rss_mb_serve"] for r in rounds),
            "stages_us_per_event_one_core": steps,
            "target": {"events_per_second": 30_000, "peak_rss_mb": 500},
        },
    )


if __name__ == "__main__":
    main(sys.argv[1:])
