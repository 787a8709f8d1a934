"""Profile and group updates through the distributed path under faults: a worker SIGKILLed
mid-stream, and Kafka stopped while updates flow. Every acknowledged update is applied
exactly once — mostly `$add`s, which a lost or doubled update would show — and the stored
profiles equal the plain-Python reference state of all acknowledged updates."""

from __future__ import annotations

import random
import threading
import time
from typing import Any

import pytest

from tests.distributed import TOKEN, Cluster, metric_value, updates_with_retry
from tests.oracle import profiles as oracle
from tests.services import kafka_down

pytestmark = [pytest.mark.kafka, pytest.mark.redis, pytest.mark.e2e, pytest.mark.timeout(300)]

BATCHES = 40
PER_BATCH = 150


def make_updates(rng: random.Random, n: int, start: int) -> list[tuple[str, dict[str, Any]]]:
    """`n` updates (path, object), each with its own `$time` (so arrival order cannot matter)."""
    base = int(time.time() * 1000) - 3_000_000
    out: list[tuple[str, dict[str, Any]]] = []
    for i in range(start, start + n):
        t = base + i * 7  # distinct times
        if rng.random() < 0.15:
            update = {
                "$token": TOKEN,
                "$group_key": "company",
                "$group_id": f"c{rng.randrange(20)}",
                "$time": t,
                "$set": {"seq": i, "tier": rng.choice(["a", "b"])},
            }
            out.append(("/groups", update))
            continue
        user = f"fault-user-{rng.randrange(120)}"
        op = rng.choices(["$add", "$set", "$union", "$remove", "$unset", "$delete"], [10, 3, 2, 1, 1, 0.2])[0]
        value: Any = {
            "$add": {"n": 1, "score": rng.choice([1, 2, 3])},
            "$set": {"plan": rng.choice(["free", "pro"]), "last": i},
            "$union": {"tags": [rng.choice("abcdef")]},
            "$remove": {"tags": rng.choice("abcdef")},
            "$unset": ["plan"],
            "$delete": "",
        }[op]
        out.append(("/engage", {"$token": TOKEN, "$distinct_id": user, "$time": t, op: value}))
    return out


def send(
    gateway_base: str,
    batch: list[tuple[str, dict[str, Any]]],
    acked: list[dict[str, Any]],
    stats: dict[str, int] | None = None,
) -> None:
    for path in ("/engage", "/groups"):
        body = [u for p, u in batch if p == path]
        if not body:
            continue
        r = updates_with_retry(gateway_base, path, body, deadline=time.monotonic() + 180, stats=stats)
        assert r.status_code == 200, r.text
        assert r.json() == {"code": 200, "status": "OK", "num_good_events": len(body)}
        acked.extend(body)


def expected_profiles(acked: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    parsed = [
        oracle.parse_update(
            u, received_ms=int(time.time() * 1000), kind="group" if "$group_key" in u else "user", seq=i
        )
        for i, u in enumerate(acked)
    ]
    assert all(isinstance(p, oracle.Update) for p in parsed)
    state = oracle.apply(parsed)
    return {f"1|{g or ''}|{pid}": profile.properties for (_, g, pid), profile in state.profiles.items()}


def run_clients(
    gateway_base: str,
    acked: list[dict[str, Any]],
    errors: list[BaseException],
    progress: list[int],
    stats: dict[str, int] | None = None,
) -> None:
    rng = random.Random(7)
    try:
        for b in range(BATCHES):
            send(gateway_base, make_updates(rng, PER_BATCH, b * PER_BATCH), acked, stats)
            progress[0] = b + 1
            time.sleep(0.03)
    except BaseException as exc:
        errors.append(exc)


def test_sigkill_worker_mid_stream_every_acknowledged_update_once(cluster: Cluster) -> None:
    worker = cluster.worker(consumers=2)
    gateway = cluster.gateway()
    acked: list[dict[str, Any]] = []
    errors: list[BaseException] = []
    progress = [0]
    thread = threading.Thread(target=run_clients, args=(gateway.base, acked, errors, progress))
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while metric_value(worker.metrics(), "footfall_worker_messages_total", 'outcome="inserted"') < 1200:
            assert time.monotonic() < deadline, "the worker never stored anything"
            time.sleep(0.05)
        worker.kill()
        assert progress[0] < BATCHES, "the stream ended before the kill: make it longer"
        time.sleep(1.0)
        restarted = cluster.worker(consumers=2)
    finally:
        thread.join()
    assert not errors, f"a client gave up: {errors[0]!r}"
    cluster.caught_up(topics=("profiles.raw", "groups.raw"), timeout=90)
    assert cluster.read_profiles(stop=[restarted]) == expected_profiles(acked)


def test_kafka_outage_while_updates_flow_every_acknowledged_update_once(cluster: Cluster) -> None:
    cluster.worker(consumers=2)
    gateway = cluster.gateway()
    acked: list[dict[str, Any]] = []
    errors: list[BaseException] = []
    stats: dict[str, int] = {}
    progress = [0]
    thread = threading.Thread(target=run_clients, args=(gateway.base, acked, errors, progress, stats))
    thread.start()
    try:
        while progress[0] < 5 and not errors:
            time.sleep(0.05)
        with kafka_down():
            stalled = len(acked)
            time.sleep(6)
            assert len(acked) - stalled <= PER_BATCH, "updates were acknowledged while Kafka was down"
    finally:
        thread.join()
    assert not errors, f"a client gave up: {errors[0]!r}"
    assert stats.get("503", 0) > 0, "the gateway never answered 503 during the outage"
    cluster.caught_up(topics=("profiles.raw", "groups.raw"), timeout=120)
    workers = [p for p in cluster.procs if p.name.startswith("worker")]
    assert cluster.read_profiles(stop=workers) == expected_profiles(acked)
