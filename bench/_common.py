"""Shared benchmark plumbing: realistic events, a `footfall serve` subprocess, results files."""

from __future__ import annotations

import json
import os
import platform
import random
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

RESULTS = Path(__file__).resolve().parent / "results"
REPO = Path(__file__).resolve().parent.parent

EVENT_NAMES = [f"event_{i:02d}" for i in range(50)]
COUNTRIES = ["US", "DE", "FR", "IN", "BR", "GB", "JP", "CA"]
BROWSERS = ["Chrome", "Firefox", "Safari", "Edge"]


def realistic_event(rng: random.Random, now: int) -> dict[str, Any]:
    """An event with 10–20 properties of mixed types, like SDK-produced ones."""
    props: dict[str, Any] = {
        "time": now - rng.randint(0, 86_400 * 5),
        "distinct_id": f"user-{rng.randint(1, 100_000)}",
        "$insert_id": uuid.UUID(int=rng.getrandbits(128)).hex,
        "$browser": rng.choice(BROWSERS),
        "$os": rng.choice(["Windows", "Mac OS X", "Linux", "iOS", "Android"]),
        "mp_country_code": rng.choice(COUNTRIES),
        "plan": rng.choice(["free", "pro", "enterprise"]),
        "price": round(rng.uniform(0, 500), 2),
        "quantity": rng.randint(1, 10),
        "is_trial": rng.random() < 0.3,
        "page": f"/products/{rng.randint(1, 5000)}",
    }
    for i in range(rng.randint(0, 8)):
        props[f"extra_{i}"] = rng.choice([rng.randint(0, 1000), f"value-{rng.randint(0, 50)}", rng.random() < 0.5])
    if rng.random() < 0.3:
        props["tags"] = [rng.choice(["a", "b", "c", "d"]) for _ in range(rng.randint(1, 4))]
    if rng.random() < 0.2:
        props["utm"] = {"source": rng.choice(["google", "newsletter"]), "campaign": f"c{rng.randint(1, 20)}"}
    return {"event": rng.choice(EVENT_NAMES), "properties": props}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


BOOTSTRAP_ENV = {
    "FOOTFALL_BOOTSTRAP_TOKEN": "bench-token",
    "FOOTFALL_BOOTSTRAP_SECRET": "bench-secret",
    "FOOTFALL_BOOTSTRAP_SA_USERNAME": "bench-sa",
    "FOOTFALL_BOOTSTRAP_SA_SECRET": "bench-sa-secret",
}


def wait_healthy(base: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(base + "/healthz", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{base} did not become healthy")


# Throughput benchmarks measure capacity, which exceeds one project's import rate limit.
UNLIMITED_IMPORTS = {"FOOTFALL_IMPORT_RATE_EVENTS_PER_SECOND": "0", "FOOTFALL_IMPORT_RATE_BYTES_PER_MINUTE": "0"}
UNLIMITED_EXPORTS = {"FOOTFALL_EXPORT_RATE_PER_HOUR": "0", "FOOTFALL_EXPORT_RATE_PER_SECOND": "0"}


@contextmanager
def serve(data_dir: Path, extra_env: dict[str, str] | None = None) -> Iterator[str]:
    port = free_port()
    env = {**os.environ, **BOOTSTRAP_ENV, "FOOTFALL_LOG_LEVEL": "warning", **UNLIMITED_IMPORTS, **(extra_env or {})}
    proc = subprocess.Popen(
        [sys.executable, "-m", "footfall.services.cli", "serve", "--port", str(port), "--data", str(data_dir)],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def reset_peak_rss() -> None:
    """Start a new peak-RSS window for this process (Linux: `5` in clear_refs resets VmHWM), so
    that what set-up held (a dataset's generation, a mutation) is not counted."""
    Path("/proc/self/clear_refs").write_text("5")


def peak_rss_mb(pid: int | str = "self") -> float:
    """A process's peak RSS (VmHWM) in MB: since its start, or for this process since the
    last `reset_peak_rss`."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def machine() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
    }


def write_result(name: str, result: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    result = {"benchmark": name, "measured_at": datetime.now(UTC).isoformat(), "machine": machine(), **result}
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return path
