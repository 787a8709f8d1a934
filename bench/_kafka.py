"""Plumbing of the Kafka benchmarks: a broker (and Redis) to run against, a credential
directory for a gateway, and `footfall gateway` / `footfall worker` subprocesses.

Kafka and Redis come from FOOTFALL_KAFKA_BOOTSTRAP / FOOTFALL_REDIS_URL when set; else
the local scripts (deploy/local/kafka.sh, redis.sh) are started, and stopped again
afterwards if this run started them.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from bench._common import BOOTSTRAP_ENV, REPO, free_port, wait_healthy
from footfall.shared.credentials import lookup_key
from footfall.shared.kafka import Topics, ensure_topics
from footfall.shared.kafka.directory import DirectoryPublisher
from footfall.shared.metadata import Directory, Project

LOCAL = REPO / "deploy" / "local"
ENV_VARS = {"kafka": "FOOTFALL_KAFKA_BOOTSTRAP", "redis": "FOOTFALL_REDIS_URL"}


@contextmanager
def service(name: str) -> Iterator[str]:
    """The address of a running Kafka/Redis: from the environment, or started locally."""
    given = os.environ.get(ENV_VARS[name], "").strip()
    if given:
        yield given
        return
    script = LOCAL / f"{name}.sh"
    was_running = subprocess.run(["bash", str(script), "status"], capture_output=True).returncode == 0
    started = subprocess.run(["bash", str(script), "start"], stdin=subprocess.DEVNULL)
    if started.returncode != 0:
        raise SystemExit(f"could not start {script}; set {ENV_VARS[name]} to a running {name}")
    address = subprocess.run(["bash", str(script), "env"], capture_output=True, text=True).stdout.strip()
    try:
        yield address.partition("=")[2]
    finally:
        if not was_running:
            subprocess.run(["bash", str(script), "stop"], stdin=subprocess.DEVNULL)


def bench_directory() -> Directory:
    """Project 1 with the bench token, as a metadata owner would publish it."""
    return Directory(
        projects={1: Project(1, "bench", "UTC")},
        tokens={lookup_key(BOOTSTRAP_ENV["FOOTFALL_BOOTSTRAP_TOKEN"]): 1},
        secrets={lookup_key(BOOTSTRAP_ENV["FOOTFALL_BOOTSTRAP_SECRET"]): 1},
        accounts={},
    )


def publish_directory(bootstrap: str, prefix: str, directory: Directory) -> None:
    async def go() -> None:
        topics = Topics.for_prefix(prefix)
        await ensure_topics(bootstrap, topics)
        publisher = DirectoryPublisher(bootstrap, topics.directory)
        try:
            await publisher.publish(directory)
        finally:
            await publisher.stop()

    asyncio.run(go())


@dataclass
class Process:
    proc: subprocess.Popen[bytes]
    base: str
    log: Path

    def cpu_seconds(self) -> float:
        """User + system CPU time of the process and its children (uvicorn workers)."""
        total = 0.0
        tick = os.sysconf("SC_CLK_TCK")
        pids = [self.proc.pid, *_children(self.proc.pid)]
        for pid in pids:
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += (int(fields[11]) + int(fields[12])) / tick
        return total

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def footfall(args: list[str], env: dict[str, str], log: Path, timeout: float = 90.0) -> Process:
    port = free_port()
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("FOOTFALL_")}
    full_env.update(BOOTSTRAP_ENV)
    full_env.update({"FOOTFALL_LOG_LEVEL": "warning", **env})
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "footfall.services.cli", *args, "--port", str(port)],
            cwd=REPO,
            env=full_env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base, timeout)
    except RuntimeError:
        proc.kill()
        raise RuntimeError(f"{args[0]} did not become healthy; log {log}:\n{log.read_text()[-3000:]}") from None
    return Process(proc, base, log)


def unique_prefix(name: str) -> str:
    return f"bench-{name}-{int(time.time())}."
