"""Helpers for the distributed-ingestion tests: `footfall gateway` / `footfall worker`
subprocesses on free ports, clients that retry like the official ones, read-back through
the export endpoint, and a Kafka "caught up" probe.

Each test gets its own topic prefix (so its own topics, consumer group and Redis key
namespace) and its own chDB folder, which the worker process owns while it runs; events
are read back by `Cluster.read_back`, which stops the workers and exports through a
`footfall query` process on the same store (a worker only ingests).
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from tests.geo import write_test_city_db

REPO = Path(__file__).resolve().parents[1]
FOOTFALL = [sys.executable, "-m", "footfall.services.cli"]

TOKEN = "dist-token-0123456789abcdef0123"
SECRET = "dist-project-secret"
SA_USER = "dist-sa"
SA_SECRET = "dist-sa-secret"
CREDS_ENV = {
    "FOOTFALL_BOOTSTRAP_TOKEN": TOKEN,
    "FOOTFALL_BOOTSTRAP_SECRET": SECRET,
    "FOOTFALL_BOOTSTRAP_SA_USERNAME": SA_USER,
    "FOOTFALL_BOOTSTRAP_SA_SECRET": SA_SECRET,
}
IMPORT_AUTH = (TOKEN, "")
QUERY_AUTH = (SECRET, "")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(predicate: Callable[[], Any], timeout: float, interval: float = 0.2, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


@dataclass
class Proc:
    """One `footfall ...` subprocess with its log file."""

    name: str
    args: list[str]
    env: dict[str, str]
    log_path: Path
    port: int
    proc: subprocess.Popen[bytes] | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, *, healthy: bool = True, timeout: float = 60.0) -> Proc:
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child
        self.proc = subprocess.Popen(
            [*FOOTFALL, *self.args], cwd=REPO, env=self.env, stdout=log, stderr=subprocess.STDOUT
        )
        log.close()
        if healthy:
            self.wait_healthy(timeout)
        return self

    def wait_healthy(self, timeout: float = 60.0) -> None:
        def ok() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited with {self.proc.returncode}:\n{self.log()[-4000:]}")
            try:
                r = httpx.get(self.base + "/healthz", timeout=2.0)
            except httpx.HTTPError:
                return False
            # `serve` answers 200 at once, "degraded" until its Kafka parts run: wait for "ok".
            return r.status_code == 200 and r.json().get("status", "ok") == "ok"

        try:
            wait_for(ok, timeout, what=f"{self.name} healthy")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n--- {self.name} log ---\n{self.log()[-4000:]}") from None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def terminate(self, timeout: float = 40.0) -> int | None:
        """SIGTERM and wait; SIGKILL if it does not exit in time."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def metrics(self) -> str:
        return httpx.get(self.base + "/metrics", timeout=5.0).text


def metric_value(text: str, name: str, labels: str = "") -> float:
    """Sum of the samples of `name` (whose label set contains `labels`) in an exposition."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith((name + "{", name + " ")):
            if labels and labels not in line:
                continue
            total += float(line.rsplit(" ", 1)[1])
    return total


@dataclass
class Cluster:
    """The processes of one test, on its own topics, group, Redis namespace and chDB folder."""

    root: Path
    kafka: str
    redis: str | None
    geoip_db: Path | None = None
    prefix: str = field(default_factory=lambda: f"t{uuid.uuid4().hex[:10]}.")
    extra_env: dict[str, str] = field(default_factory=dict)
    procs: list[Proc] = field(default_factory=list)

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def raw_topic(self) -> str:
        return f"{self.prefix}events.raw"  # the events stream's topic

    @property
    def dlq_topic(self) -> str:
        return f"{self.prefix}footfall.dlq"

    @property
    def group(self) -> str:
        return f"{self.prefix}footfall-workers"

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("FOOTFALL_")}
        env.update(CREDS_ENV)
        env.update(
            {
                "FOOTFALL_KAFKA_BOOTSTRAP": self.kafka,
                "FOOTFALL_KAFKA_TOPIC_PREFIX": self.prefix,
                "FOOTFALL_DATA_DIR": str(self.data_dir),
                "FOOTFALL_LOG_FORMAT": "json",
                "FOOTFALL_KAFKA_PUBLISH_TIMEOUT": "3",
                "FOOTFALL_WORKER_BATCH_SECONDS": "0.2",
                "FOOTFALL_WORKER_BATCH_SIZE": "2000",
            }
        )
        if self.redis:
            env["FOOTFALL_REDIS_URL"] = self.redis
        if self.geoip_db:
            env["FOOTFALL_GEOIP_DB"] = str(self.geoip_db)
        env.update(self.extra_env)
        env.update(extra)
        return env

    def publish_directory(self) -> None:
        """`footfall directory publish`: creates project 1 in the chDB folder and publishes it."""
        self.root.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [*FOOTFALL, "directory", "publish"], cwd=REPO, env=self.env(), capture_output=True, timeout=120
        )
        assert done.returncode == 0, done.stderr.decode(errors="replace")[-4000:]

    def _proc(self, name: str, args: list[str], **env: str) -> Proc:
        port = free_port()
        proc = Proc(name, [*args, "--port", str(port)], self.env(**env), self.root / f"{name}.log", port)
        self.procs.append(proc)
        return proc

    def gateway(self, *, start: bool = True, **env: str) -> Proc:
        proc = self._proc(f"gateway-{len(self.procs)}", ["gateway"], **env)
        return proc.start() if start else proc

    def worker(self, consumers: int = 2, *, start: bool = True, **env: str) -> Proc:
        proc = self._proc(f"worker-{len(self.procs)}", ["worker", "--consumers", str(consumers)], **env)
        return proc.start() if start else proc

    def serve(self, *, start: bool = True, **env: str) -> Proc:
        proc = self._proc(f"serve-{len(self.procs)}", ["serve"], **env)
        return proc.start() if start else proc

    def query(self, *, start: bool = True, **env: str) -> Proc:
        proc = self._proc(f"query-{len(self.procs)}", ["query"], **env)
        return proc.start() if start else proc

    def read_back(self, tag: str, *, stop: list[Proc]) -> list[dict]:
        """The stored events of `tag`, read by a `footfall query` process once the processes
        in `stop` (the workers holding the chDB folder) have stopped."""
        for proc in stop:
            proc.terminate()
        reader = self.query()
        try:
            return export_events(reader.base, tag=tag)
        finally:
            reader.terminate()

    def read_profiles(self, *, stop: list[Proc]) -> dict[str, dict[str, Any]]:
        """The live profiles of the store ({"<project>|<group key>|<id>": properties}), read once
        the processes in `stop` (the workers holding the chDB folder) have stopped."""
        for proc in stop:
            proc.terminate()
        profiles: dict[str, dict[str, Any]] = run_driver("dump-profiles", "--data", str(self.data_dir))["profiles"]
        return profiles

    def stop_all(self) -> None:
        for proc in reversed(self.procs):
            proc.terminate(timeout=20)

    def caught_up(self, timeout: float = 60.0, *, topics: tuple[str, ...] = ("events.raw",)) -> None:
        """Wait until the workers' group has committed the end of each topic (names unprefixed)."""
        for topic in topics:
            asyncio.run(wait_caught_up(self.kafka, self.group, self.prefix + topic, timeout))


# -- events and clients ------------------------------------------------------------------


def make_events(n: int, tag: str, *, start: int = 0, users: int = 37, ip: str | None = "81.2.69.160") -> list[dict]:
    """`n` distinct, valid events; `$insert_id`s carry `tag` so tests can find theirs."""
    now = int(time.time()) - 120
    out = []
    for i in range(start, start + n):
        props: dict[str, Any] = {
            "time": now - (i % 600),
            "distinct_id": f"{tag}-user-{i % users}",
            "$insert_id": f"{tag}-{i:08d}"[-36:],
            "seq": i,
            "tag": tag,
            "plan": ("free", "pro", "enterprise")[i % 3],
        }
        if ip:
            props["ip"] = ip
        out.append({"event": ("Page View", "Sign Up", "Purchase")[i % 3], "properties": props})
    return out


def post_import(base: str, events: list[dict], *, timeout: float = 30.0) -> httpx.Response:
    return httpx.post(
        base + "/import",
        params={"strict": "1"},
        content=orjson.dumps(events),
        headers={"content-type": "application/json"},
        auth=IMPORT_AUTH,
        timeout=timeout,
    )


def post_updates(base: str, path: str, updates: list[dict], *, timeout: float = 30.0) -> httpx.Response:
    """`/engage` or `/groups` with a JSON body, strict (tokens in the updates, no address)."""
    return httpx.post(
        base + path,
        params={"strict": "1", "ip": "0"},
        content=orjson.dumps(updates),
        headers={"content-type": "application/json"},
        timeout=timeout,
    )


def updates_with_retry(
    base: str, path: str, updates: list[dict], *, deadline: float, stats: dict[str, int] | None = None
) -> httpx.Response:
    """`import_with_retry` for profile updates."""
    return import_with_retry(base, updates, deadline=deadline, stats=stats, post=lambda b, u: post_updates(b, path, u))


def import_with_retry(
    base: str,
    events: list[dict],
    *,
    deadline: float,
    stats: dict[str, int] | None = None,
    post: Callable[[str, list[dict]], httpx.Response] = post_import,
) -> httpx.Response:
    """Send until the gateway answers something other than 503 / a connection error
    (like the official clients, honouring Retry-After, capped so tests stay quick)."""
    while True:
        try:
            r = post(base, events)
            if r.status_code != 503:
                return r
            if stats is not None:
                stats["503"] = stats.get("503", 0) + 1
            assert r.headers.get("retry-after"), "503 without Retry-After"
            wait = min(float(r.headers["retry-after"]), 1.0)
        except httpx.TransportError:
            if stats is not None:
                stats["transport"] = stats.get("transport", 0) + 1
            wait = 0.5
        if time.monotonic() > deadline:
            raise AssertionError("the gateway kept refusing events until the deadline")
        time.sleep(wait)


def export_events(base: str, *, tag: str | None = None, timeout: float = 60.0) -> list[dict]:
    today = datetime.now(UTC).date()
    params = {
        "from_date": (today - timedelta(days=1)).isoformat(),
        "to_date": today.isoformat(),
        "project_id": "1",
    }
    r = httpx.get(base + "/api/2.0/export", params=params, auth=QUERY_AUTH, timeout=timeout)
    assert r.status_code == 200, r.text[:500]
    rows = [orjson.loads(line) for line in r.content.splitlines() if line.strip()]
    if tag is not None:
        rows = [row for row in rows if row["properties"].get("tag") == tag]
    return rows


def insert_ids(rows: list[dict]) -> list[str]:
    return [row["properties"]["$insert_id"] for row in rows]


# -- Kafka probes ------------------------------------------------------------------------


async def group_lag(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    """Per partition: end offset minus the group's committed offset (missing commit = 0)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await consumer.start()
    await admin.start()
    try:
        described = await admin.describe_topics([topic])
        numbers = sorted(p["partition"] for t in described if t["topic"] == topic for p in t["partitions"])
        partitions = [TopicPartition(topic, p) for p in numbers]
        ends = await consumer.end_offsets(partitions)
        committed = await admin.list_consumer_group_offsets(group)
        return {tp.partition: ends[tp] - (committed[tp].offset if tp in committed else 0) for tp in partitions}
    finally:
        await admin.close()
        await consumer.stop()


async def wait_caught_up(bootstrap: str, group: str, topic: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            lag = await group_lag(bootstrap, group, topic)
            if lag and all(v <= 0 for v in lag.values()):
                return
            last = lag
        except Exception as exc:  # the broker restarting in a fault test
            last = exc
        await asyncio.sleep(0.3)
    raise AssertionError(f"consumer group {group} did not catch up in {timeout} s: last lag {last!r}")


# -- fixtures (re-exported by the conftest.py of the directories that use them) ----------


@pytest.fixture(scope="session")
def geoip_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_test_city_db(tmp_path_factory.mktemp("geo") / "city.mmdb")


@pytest.fixture
def cluster(tmp_path: Path, kafka_bootstrap: str, redis_url: str, geoip_db: Path):  # type: ignore[no-untyped-def]
    """A fresh namespace (topics, group, Redis keys, chDB folder) with project 1 published."""
    c = Cluster(tmp_path, kafka_bootstrap, redis_url, geoip_db)
    c.publish_directory()
    try:
        yield c
    finally:
        c.stop_all()


def run_driver(*args: str, timeout: float = 150.0) -> dict[str, Any]:
    """Run `python -m tests.distributed_driver ...` (in-process scenarios that need their own
    chDB: one data folder per process) and return the JSON it prints last."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.distributed_driver", *args],
        cwd=REPO,
        env={k: v for k, v in os.environ.items() if not k.startswith("FOOTFALL_")} | {"FOOTFALL_LOG_FORMAT": "json"},
        capture_output=True,
        timeout=timeout,
    )
    if done.returncode != 0:
        raise AssertionError(
            f"driver {args[0]} failed ({done.returncode}):\n{done.stderr.decode(errors='replace')[-6000:]}"
        )
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    result: dict[str, Any] = orjson.loads(lines[-1])
    return result
