"""In-process scenarios of the distributed tests, each run in its own Python process
(`tests.distributed.run_driver`) because chDB allows one data folder per process and the
pytest process may already hold one. Each prints one JSON line with what it observed;
the tests assert on it.

    python -m tests.distributed_driver rotate-token --data D --add NEW --revoke OLD
    python -m tests.distributed_driver rebalance --kafka K --redis R --prefix P --data D
    python -m tests.distributed_driver warehouse-outage --kafka K --redis R --prefix P --data D
    python -m tests.distributed_driver dump-profiles --data D    (the live profiles of the store)
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson

from footfall.services.gateway.kafka_sink import KafkaSink
from footfall.services.worker.enrich import Enricher
from footfall.services.worker.main import WorkerGroup, build_worker_group
from footfall.services.worker.settings import WorkerSettings
from footfall.shared import metrics
from footfall.shared.config import KafkaSettings
from footfall.shared.events import Event
from footfall.shared.logging import configure_logging
from footfall.shared.metadata import MetadataRepository
from footfall.shared.schema import apply_migrations
from footfall.shared.streams import EVENTS
from footfall.shared.warehouse import ClickHouseWarehouse, WarehouseError, open_warehouse
from tests.distributed import group_lag, wait_caught_up


def chdb(data: Path) -> ClickHouseWarehouse:
    data.mkdir(parents=True, exist_ok=True)
    warehouse = open_warehouse(f"chdb://{(data / 'chdb').resolve()}")
    apply_migrations(warehouse)
    return warehouse


def settings_for(args: argparse.Namespace) -> WorkerSettings:
    kafka = KafkaSettings(bootstrap=args.kafka, topic_prefix=args.prefix, publish_timeout=5.0)
    return WorkerSettings(kafka=kafka, redis_url=args.redis, batch_seconds=0.2, batch_size=1000)


def make_events(n: int, start: int = 0) -> list[Event]:
    now = int(time.time() * 1000) - 60_000
    return [
        Event(1, "Driven", now - i, f"user-{i % 101}", f"drv-{i:08d}", {"seq": i, "run": "driver"})
        for i in range(start, start + n)
    ]


def counts(warehouse: ClickHouseWarehouse) -> dict[str, int]:
    rows = warehouse.query("SELECT count(), uniqExact(dedup_hash) FROM events WHERE project_id = 1")
    final = warehouse.query("SELECT count() FROM events FINAL WHERE project_id = 1")
    return {"rows": int(rows[0][0]), "unique": int(rows[0][1]), "final": int(final[0][0])}


async def until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


def events_partitions(group: WorkerGroup, i: int) -> list[int]:
    """Consumer i's partitions of the events topic (it also holds the other streams')."""
    topic = group.topics.of(EVENTS)
    return sorted(tp.partition for tp in group.consumers[i].assignment() if tp.topic == topic)


def partitions_of(group: WorkerGroup) -> list[list[int]]:
    return [events_partitions(group, i) for i in range(len(group.consumers))]


def covered(group: WorkerGroup, members: Sequence[int], total: int = 12) -> bool:
    """The members share every events partition and each holds some."""
    held = [events_partitions(group, i) for i in members]
    return sorted(p for parts in held for p in parts) == list(range(total)) and all(held)


# -- scenarios ---------------------------------------------------------------------------


def rotate_token(args: argparse.Namespace) -> dict[str, Any]:
    warehouse = chdb(Path(args.data))
    try:
        repo = MetadataRepository(warehouse)
        repo.add_project_credential(1, "token", args.add)
        repo.revoke_project_credential(1, "token", args.revoke)
        tokens = len(repo.load_directory().tokens)
    finally:
        warehouse.close()
    return {"tokens": tokens}


async def rebalance(args: argparse.Namespace) -> dict[str, Any]:
    """Three consumers in one process share the partitions; one stops mid-stream and its
    partitions move to the other two; nothing is lost, nothing surfaces twice."""
    settings = settings_for(args)
    warehouse = chdb(Path(args.data))
    group = build_worker_group(settings, warehouse, Enricher(None), consumers=3)
    sink = KafkaSink(settings.kafka)
    await group.start()
    await sink.start()
    try:
        await until(lambda: covered(group, [0, 1, 2]), 40, "three consumers sharing the partitions")
        before = partitions_of(group)
        total, per, rounds = 0, 500, 24
        stopped_at = -1
        for r in range(rounds):
            await sink.publish(EVENTS, make_events(per, start=r * per))
            total += per
            if r == rounds // 3:
                await until(lambda: group.consumers[1].last_batch_at is not None, 20, "consumer 1 working")
                await group.consumers[1].stop()  # leaves the group mid-stream
                stopped_at = total
            await asyncio.sleep(0.05)
        await until(lambda: covered(group, [0, 2]), 40, "the two left covering every partition")
        after = partitions_of(group)
        await wait_caught_up(settings.kafka.bootstrap, group.topics.workers_group, group.topics.of(EVENTS), 60)
    finally:
        await sink.stop()
        await group.stop()
    result = counts(warehouse)
    warehouse.close()
    return {"sent": total, "stopped_after": stopped_at, "before": before, "after": after, **result}


class FlakyWarehouse:
    """The real chDB warehouse, whose inserts (rows, or Native blocks as the workers' fast path
    sends them) fail while `down` (ClickHouse unreachable)."""

    def __init__(self, inner: ClickHouseWarehouse) -> None:
        self.inner = inner
        self.down = False
        self.failed_inserts = 0

    def _outage(self) -> None:
        if self.down:
            self.failed_inserts += 1
            raise WarehouseError("Connection refused (simulated ClickHouse outage)")

    def insert(self, *args: Any, **kwargs: Any) -> None:
        self._outage()
        self.inner.insert(*args, **kwargs)

    def insert_native(self, *args: Any, **kwargs: Any) -> None:
        self._outage()
        self.inner.insert_native(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def warehouse_outage(args: argparse.Namespace) -> dict[str, Any]:
    """Inserts fail: the batch is retried with backoff and no offset is committed; a
    consumer stopped during the outage abandons its batch without committing; after the
    warehouse is back every event is stored once."""
    settings = settings_for(args)
    inner = chdb(Path(args.data))
    flaky = FlakyWarehouse(inner)
    flaky.down = True
    sink = KafkaSink(settings.kafka)
    await sink.start()
    group = build_worker_group(settings, flaky, Enricher(None), consumers=2)  # type: ignore[arg-type]
    await group.start()
    await until(lambda: covered(group, [0, 1]), 40, "consumers assigned")
    n = 3000
    await sink.publish(EVENTS, make_events(n))
    await until(lambda: flaky.failed_inserts >= 3, 30, "insert retries")
    lag_down = sum(
        (await group_lag(settings.kafka.bootstrap, group.topics.workers_group, group.topics.of(EVENTS))).values()
    )
    rows_down = counts(inner)["rows"]
    retries = metrics.WORKER_INSERT_RETRIES._value.get()  # type: ignore[attr-defined]
    stop_started = time.monotonic()
    await group.stop()  # SIGTERM during the outage: abandon, commit nothing
    stop_seconds = time.monotonic() - stop_started
    lag_after_stop = sum(
        (await group_lag(settings.kafka.bootstrap, group.topics.workers_group, group.topics.of(EVENTS))).values()
    )

    flaky.down = False
    group2 = build_worker_group(settings, flaky, Enricher(None), consumers=2)  # type: ignore[arg-type]
    await group2.start()
    try:
        await sink.publish(EVENTS, make_events(500, start=n))
        await wait_caught_up(settings.kafka.bootstrap, group2.topics.workers_group, group2.topics.of(EVENTS), 60)
    finally:
        await group2.stop()
        await sink.stop()
    result = counts(inner)
    inner.close()
    return {
        "sent": n + 500,
        "lag_while_down": lag_down,
        "rows_while_down": rows_down,
        "retries": retries,
        "stop_seconds": round(stop_seconds, 2),
        "lag_after_stop": lag_after_stop,
        **result,
    }


def dump_profiles(args: argparse.Namespace) -> dict[str, Any]:
    """Every live profile of the store, as {"<project>|<group key>|<id>": properties}."""
    warehouse = chdb(Path(args.data))
    try:
        rows = warehouse.query(
            "SELECT project_id, group_key, profile_id, properties FROM profiles FINAL WHERE deleted = 0"
        )
    finally:
        warehouse.close()
    return {"profiles": {f"{p}|{g}|{pid}": orjson.loads(props) for p, g, pid, props in rows}}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tests.distributed_driver")
    sub = parser.add_subparsers(dest="scenario", required=True)
    rot = sub.add_parser("rotate-token")
    rot.add_argument("--data", required=True)
    rot.add_argument("--add", required=True)
    rot.add_argument("--revoke", required=True)
    dump = sub.add_parser("dump-profiles")
    dump.add_argument("--data", required=True)
    for name in ("rebalance", "warehouse-outage"):
        p = sub.add_parser(name)
        p.add_argument("--kafka", required=True)
        p.add_argument("--redis", default="")
        p.add_argument("--prefix", default=f"d{uuid.uuid4().hex[:10]}.")
        p.add_argument("--data", required=True)
    args = parser.parse_args(argv)
    configure_logging("warning", "json")
    if args.scenario == "rotate-token":
        result = rotate_token(args)
    elif args.scenario == "dump-profiles":
        result = dump_profiles(args)
    elif args.scenario == "rebalance":
        result = asyncio.run(rebalance(args))
    else:
        result = asyncio.run(warehouse_outage(args))
    print(orjson.dumps(result).decode(), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
